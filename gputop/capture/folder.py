"""Where a capture's files go: one private folder per capture, files written as ``.partial``
and renamed when complete, a free-disk check before anything starts."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = "gputop-captures"
MIN_FREE = 2 * 2**30
"""Refuse to start with less free space than this (or 3x the capture's byte cap)."""


class CaptureError(Exception):
    """A capture that cannot start or go on: the message says what happened and what to do."""


@dataclass(frozen=True)
class FileEntry:
    """One file of a capture, as its manifest lists it: size and hash let a copy be checked."""

    path: str
    """Relative to the capture folder."""
    bytes: int
    sha256: str


def capture_root(configured: str | None = None) -> Path:
    """``--dir``, else $GPUTOP_CAPTURE_DIR, else ./gputop-captures."""
    return Path(configured or os.environ.get("GPUTOP_CAPTURE_DIR") or DEFAULT_ROOT)


def check_free(root: Path, max_bytes: int) -> None:
    """Raise unless the disk under ``root`` has room for the capture and some to spare."""
    probe = root
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    need = max(MIN_FREE, 3 * max_bytes)
    if free < need:
        raise CaptureError(
            f"only {free / 2**30:.1f} GiB free under {probe.resolve()}; a capture needs "
            f"{need / 2**30:.1f} GiB: free some space or pass --dir on a bigger disk"
        )


def new_folder(root: Path, kind: str, now: float | None = None, host: str | None = None) -> Path:
    """``<root>/<UTC time>-<kind>-<host>/``, private to the user (0700, the root too when
    made here); a second capture in the same second gets a suffix."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    name = f"{stamp}-{kind}-{_safe(host or socket.gethostname())}"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise CaptureError(f"cannot make the capture folder {root}: {e.strerror}") from e
    for n in range(100):
        path = root / (name if n == 0 else f"{name}-{n}")
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        except OSError as e:
            raise CaptureError(f"cannot make {path}: {e.strerror}") from e
        os.chmod(path, 0o700)  # whatever the umask
        return path
    raise CaptureError(f"too many captures named {name} in {root}")


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:64] or "host"


def partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


def private_file(path: Path) -> int:
    """Open ``path`` for writing, 0600, refusing to follow a symlink planted there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    return os.open(path, flags, 0o600)


def write_partial(path: Path, data: bytes) -> None:
    """Write ``data`` as ``path.partial`` and rename it to ``path`` once complete."""
    tmp = partial(path)
    fd = private_file(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def entry(folder: Path, path: Path) -> FileEntry:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return FileEntry(str(path.relative_to(folder)), path.stat().st_size, digest.hexdigest())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
