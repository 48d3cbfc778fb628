"""The capture root as it is: each capture folder with its kind, status, trigger (armed ones)
and size, oldest first; and the disk budget kept by removing the oldest armed captures.

Every read goes through held descriptors from the checked root (``folder.open_root``), never
follows a link, and is bounded: a folder's manifest is read up to MAX_MANIFEST bytes, its
files counted to MAX_FILES, MAX_DEPTH deep. A folder that is not a capture (no manifest, one
that does not parse) is listed as such and never removed. Hand-taken captures are never
removed; a running one neither.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputop.capture.folder import CaptureError, open_root
from gputop.model.shown import printable

MAX_MANIFEST = 1 << 20
MAX_FILES = 10_000
MAX_DEPTH = 8
MAX_FOLDERS = 10_000
"""Capture folders listed at most (a root somebody filled)."""
SHOWN = 200
"""Characters of a manifest's field listed at most."""
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Kept:
    """One capture folder in the root."""

    name: str
    kind: str | None
    status: str | None
    trigger: str | None
    """What fired it (an armed capture); None: taken by hand, or not a capture."""
    why: str
    bytes: int
    note: str = ""
    """Why this folder is not read as a capture (no manifest, a damaged one)."""

    @property
    def armed(self) -> bool:
        return self.trigger is not None


def listing(root: Path) -> list[Kept]:
    """Every folder in ``root``, oldest first (their names start with the UTC time they were
    made); [] when the root does not exist yet. Raises CaptureError when it cannot be read."""
    if not os.path.lexists(root):
        return []
    try:
        fd = open_root(root)
    except OSError as e:
        raise CaptureError(f"cannot open the capture folder {root}: {e.strerror}") from e
    try:
        names = sorted(_folders(fd))[:MAX_FOLDERS]
        return [_read(fd, n) for n in names]
    finally:
        os.close(fd)


def _folders(fd: int) -> list[str]:
    with os.scandir(fd) as it:
        return [e.name for e in it if e.is_dir(follow_symlinks=False)]


def _read(root_fd: int, name: str) -> Kept:
    try:
        fd = os.open(name, _DIR, dir_fd=root_fd)
    except OSError as e:
        return Kept(name, None, None, None, "", 0, f"cannot open it ({e.strerror})")
    try:
        size = _size(fd, 0, [0])
        doc, note = _manifest(fd)
    finally:
        os.close(fd)
    if doc is None:
        return Kept(name, None, None, None, "", size, note)
    trigger = doc.get("trigger")
    fired = trigger.get("trigger") if isinstance(trigger, dict) else None
    why = trigger.get("why") if isinstance(trigger, dict) else None
    return Kept(
        name,
        _text(doc.get("kind")),
        _text(doc.get("status")),
        _text(fired),
        _text(why) or "",
        size,
    )


def _text(v: Any) -> str | None:
    """A string from a crafted manifest as one safe line (``printable``); None if not one."""
    return printable(v, SHOWN) if isinstance(v, str) else None


def _manifest(fd: int) -> tuple[dict[str, Any] | None, str]:
    try:
        mfd = os.open("manifest.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except FileNotFoundError:
        return None, "no manifest.json: not a capture"
    except OSError as e:
        return None, f"cannot read its manifest.json ({e.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(mfd).st_mode):
            return None, "its manifest.json is not a file"
        raw = os.read(mfd, MAX_MANIFEST + 1)
    finally:
        os.close(mfd)
    if len(raw) > MAX_MANIFEST:
        return None, f"its manifest.json is over {MAX_MANIFEST >> 20} MiB"
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return None, "its manifest.json is not JSON"
    if not isinstance(doc, dict):
        return None, "its manifest.json is not an object"
    return doc, ""


def _size(fd: int, depth: int, count: list[int]) -> int:
    """Bytes of the files under the folder held by ``fd`` (links not followed, bounded)."""
    total = 0
    with os.scandir(fd) as it:
        entries = list(it)
    for e in entries:
        count[0] += 1
        if count[0] > MAX_FILES:
            break
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
            try:
                sub = os.open(e.name, _DIR, dir_fd=fd)
            except OSError:
                continue
            try:
                total += _size(sub, depth + 1, count)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            total += st.st_size
    return total


def prune(root: Path, budget_bytes: int, keep: frozenset[str] = frozenset()) -> list[Kept]:
    """Remove the oldest armed captures that are done until the root holds ``budget_bytes``
    or less (``keep``: folders never removed, such as the capture starting now); the ones
    removed. Hand-taken captures, running ones and folders that are not captures stay."""
    folders = listing(root)
    total = sum(k.bytes for k in folders)
    removable = [k for k in folders if k.armed and k.status != "running" and k.name not in keep]
    removed: list[Kept] = []
    if total <= budget_bytes or not removable:
        return removed
    fd = open_root(root)
    try:
        for k in removable:
            if total <= budget_bytes:
                break
            with contextlib.suppress(OSError):
                _remove_tree(fd, k.name, 0)
                total -= k.bytes
                removed.append(k)
    finally:
        os.close(fd)
    return removed


def _remove_tree(parent: int, name: str, depth: int) -> None:
    """``name`` under ``parent`` and everything in it, through descriptors (a link inside is
    removed, never followed)."""
    if depth > MAX_DEPTH:
        raise OSError(f"{name}: deeper than {MAX_DEPTH}")
    fd = os.open(name, _DIR, dir_fd=parent)
    try:
        with os.scandir(fd) as it:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        for child, is_dir in entries:
            if is_dir:
                _remove_tree(fd, child, depth + 1)
            else:
                os.unlink(child, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)
