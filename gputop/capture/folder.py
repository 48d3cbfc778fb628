"""Where a capture's files go: one private folder per capture, held open from the moment it is
made, files written as ``.partial`` and renamed when complete, a free-disk check before anything
starts.

No folder is looked up by name twice (issue 17). The root is walked from ``/`` one component at
a time, each opened relative to the last with ``O_NOFOLLOW``; a folder on the way that other
users may write without the sticky bit is refused, and so is a root that is a symlink or belongs
to another user. The capture folder is made (``mkdirat``) and opened relative to the root's
descriptor, ``fchmod``-ed, and kept open: every file gputop writes is created relative to that
descriptor (``O_CREAT|O_EXCL|O_NOFOLLOW``) and renamed there, and a tool that takes a path gets
one through the descriptor (``/proc/self/fd/N/...``). Renaming the folder, or one above it, and
planting a symlink in its place then changes nothing: the files land in the folder that was
made, and nothing else is chmodded."""

from __future__ import annotations

import contextlib
import grp
import hashlib
import os
import pwd
import shutil
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from gputop.errors import BadUsage, CannotDo

DEFAULT_ROOT = "gputop-captures"
MIN_FREE = 2 * 2**30
"""Refuse to start with less free space than this (or 3x the capture's byte cap)."""
MAX_LINKS = 40
"""Symlinks followed while walking to the root, like the kernel's own limit."""
FIX = "pass --dir (or set GPUTOP_CAPTURE_DIR) to a folder only you can write"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class CaptureError(CannotDo):
    """A capture that cannot start or go on: the message says what happened and what to do."""

    when = "a capture cannot start: the target gone, a folder refused, no room"


class CaptureBoundsError(BadUsage, CaptureError):
    """A bound given out of its range (--seconds, --rate, --steps, --max-mb): a usage error,
    and still a CaptureError for the screen's keys, which catch those."""

    when = "a capture's --seconds, --rate, --steps or --max-mb out of its range"


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


def plain(name: str) -> bool:
    """A file name that stays in its folder: no separator, not ``.`` or ``..``."""
    return bool(name) and "/" not in name and "\0" not in name and name not in (".", "..")


class Folder:
    """One capture folder, held by a directory descriptor: every read and write goes through
    the descriptor, never through the folder's path, so a swapped path changes nothing."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        """As made (``<root>/<name>``): for people to read, never to write through."""
        self.fd = fd

    @property
    def name(self) -> str:
        return self.path.name

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def real_path(self) -> Path:
        """Where the held folder is now, for a process that needs a path (an agent, nsys)."""
        try:
            return Path(os.readlink(f"/proc/self/fd/{self.fd}"))
        except OSError:
            return self.path.absolute()

    def tool_path(self, name: str) -> str:
        """``name`` in this folder for a child started with ``pass_fds=(self.fd,)``: the path
        goes through the child's copy of the descriptor, so no folder name is looked up."""
        return f"/proc/self/fd/{self.fd}/{_checked(name)}"

    def create(self, name: str) -> int:
        """A new file, 0600, opened for writing; an existing file or a symlink there is an error."""
        fd = os.open(_checked(name), _NEW, 0o600, dir_fd=self.fd)
        os.fchmod(fd, 0o600)  # whatever the umask
        return fd

    def write(self, name: str, data: bytes) -> None:
        """Write ``data`` as ``name.partial`` and rename it to ``name`` once complete."""
        tmp = name + ".partial"
        try:
            with os.fdopen(self.create(tmp), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            self.remove(tmp)
            raise
        self.rename(tmp, name)

    def rename(self, src: str, dst: str) -> None:
        os.replace(_checked(src), _checked(dst), src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            os.unlink(_checked(name), dir_fd=self.fd)

    def size(self, name: str) -> int | None:
        """The size of the regular file ``name``; None when there is none (or something else)."""
        if not plain(name):
            return None
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))

    def read(self, name: str) -> bytes:
        with os.fdopen(self._open(name), "rb") as f:
            return f.read()

    def read_at_most(self, name: str, most: int) -> bytes | None:
        """The regular file ``name`` if it holds ``most`` bytes or fewer, else None (a file
        someone else wrote may be of any size)."""
        with os.fdopen(self._open(name), "rb") as f:
            data = f.read(most + 1)
        return data if len(data) <= most else None

    def make_private(self, name: str) -> None:
        """0600 on a file a tool wrote (through the descriptor, a symlink is not followed)."""
        fd = self._open(name)
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)

    def entry(self, name: str) -> FileEntry:
        digest = hashlib.sha256()
        with os.fdopen(self._open(name), "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
            size = os.fstat(f.fileno()).st_size
        return FileEntry(name, size, digest.hexdigest())

    def _open(self, name: str) -> int:
        fd = os.open(_checked(name), _READ, dir_fd=self.fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise IsADirectoryError(21, "not a regular file", name)
        return fd


def _checked(name: str) -> str:
    if not plain(name):
        raise ValueError(f"not a plain file name: {name!r}")
    return name


def new_folder(root: Path, kind: str, now: float | None = None, host: str | None = None) -> Folder:
    """``<root>/<UTC time>-<kind>-<host>/``, private to the user (0700, the root too when made
    here), held open; a second capture in the same second gets a suffix. The caller closes it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    name = f"{stamp}-{kind}-{_safe(host or socket.gethostname())}"
    try:
        root_fd = open_root(root)
    except OSError as e:  # the walk's own lookups say what they found; this is the rest
        raise CaptureError(f"cannot open the capture folder {root}: {e.strerror}") from e
    try:
        for n in range(100):
            one = name if n == 0 else f"{name}-{n}"
            try:
                os.mkdir(one, 0o700, dir_fd=root_fd)
            except FileExistsError:
                continue
            except OSError as e:
                raise CaptureError(f"cannot make {root / one}: {e.strerror}") from e
            return Folder(root / one, _hold_new(root, one, root_fd))
        raise CaptureError(f"too many captures named {name} in {root}")
    finally:
        os.close(root_fd)


def _hold_new(root: Path, name: str, root_fd: int) -> int:
    """The folder just made, opened without following a link and checked to be a directory of
    ours, then made 0700 through the descriptor."""
    swapped = (
        f"{root / name} was replaced right after it was made: another process can write "
        f"{root}; {FIX}"
    )
    try:
        fd = os.open(name, _DIR, dir_fd=root_fd)
    except OSError as e:
        raise CaptureError(swapped) from e
    try:
        mine = os.fstat(fd).st_uid == os.geteuid()
        if mine:
            os.fchmod(fd, 0o700)  # whatever the umask
    except OSError as e:
        os.close(fd)
        raise CaptureError(f"cannot make {root / name} private: {e.strerror}") from e
    if not mine:
        os.close(fd)
        raise CaptureError(swapped)
    return fd


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:64] or "host"


def open_root(root: Path, fix: str = FIX, kind: str = "capture folder") -> int:
    """A descriptor on the capture root, made (0700, with any missing parents) when missing.
    Walked from ``/`` a component at a time without following a link in one lookup, and
    refused with one line when a folder on the way could let another user swap what lies below
    it (``kind``: what the folder is, ``fix``: what to do, in that line; the job's memory walks
    to its folder the same way). (A folder owned by another user but not writable by others is
    theirs to rearrange: all they could swap in is a link or a folder of theirs, and the root
    refuses both.)"""
    parts = _parts(os.path.abspath(root))
    fd = os.open("/", _DIR)
    here, links = "/", 0
    try:
        _check_dir(here, os.fstat(fd), fix, kind)
        while parts:
            part = parts.pop(0)
            there = os.path.normpath(os.path.join(here, part))
            st = _lookup(fd, part, there, root, fix=fix, kind=kind) if part != ".." else None
            if st is not None and stat.S_ISLNK(st.st_mode):
                if not parts:
                    raise CaptureError(f"the {kind} {root} is a symlink: {fix}")
                links += 1
                if links > MAX_LINKS:
                    raise CaptureError(f"cannot open {root}: too many levels of symbolic links")
                target = os.readlink(part, dir_fd=fd)
                parts[:0] = _parts(target)
                if target.startswith("/"):
                    fd, here = _step(fd, "/", "/"), "/"
                continue
            made = st is None and part != ".."
            fd, here = _step(fd, part, there), there
            st = os.fstat(fd)
            if made and st.st_uid == os.geteuid():  # made just now: 0700 whatever the umask
                os.fchmod(fd, 0o700)
                st = os.fstat(fd)
            _check_dir(here, st, fix, kind)
            if not parts and st.st_uid not in (0, os.geteuid()):
                raise CaptureError(
                    f"the {kind} {root} belongs to uid {st.st_uid}, not to you: its "
                    f"owner could swap a {kind} for a link; {fix}"
                )
        return fd
    except BaseException:
        os.close(fd)
        raise


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _step(fd: int, name: str, shown: str) -> int:
    """Open ``name`` (a directory, not a link) relative to ``fd``; ``fd`` is closed once it is."""
    try:
        new = os.open(name, _DIR, dir_fd=fd)
    except OSError as e:
        raise CaptureError(f"cannot open {shown}: {e.strerror}") from e
    os.close(fd)
    return new


def _lookup(
    fd: int, name: str, shown: str, root: Path, make: bool = True, fix: str = FIX,
    kind: str = "capture folder",
) -> os.stat_result | None:  # fmt: skip
    """The entry ``name`` in the folder ``fd``, not followed; None when it was missing and is
    now made, 0700. An entry another user owns in a folder every user may write is refused."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        if not make:
            raise CaptureError(f"cannot open {shown}: it came and went") from None
        try:
            os.mkdir(name, 0o700, dir_fd=fd)
        except FileExistsError:  # made meanwhile by someone else: look again, and check it
            return _lookup(fd, name, shown, root, make=False, fix=fix, kind=kind)
        except OSError as e:
            raise CaptureError(f"cannot make the {kind} {root}: {e.strerror}") from e
        return None
    except OSError as e:
        raise CaptureError(f"cannot open {shown}: {e.strerror}") from e
    if _writers(os.fstat(fd)) and st.st_uid not in (0, os.geteuid()):
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else "a folder"
        what_goes = "captures" if kind == "capture folder" else f"the {kind}"
        raise CaptureError(
            f"{shown} is {what} of uid {st.st_uid} in a folder every user may write: its "
            f"owner decides where {what_goes} would go; {fix}"
        )
    return st


def _check_dir(
    shown: str, st: os.stat_result, fix: str = FIX, kind: str = "capture folder"
) -> None:
    """Refuse a folder others may write without the sticky bit: they could rename what is in
    it and plant a link (with the sticky bit, only an entry's owner may)."""
    who = _writers(st)
    if who and not st.st_mode & stat.S_ISVTX:
        raise CaptureError(
            f"{shown} can be written by {who} (mode {stat.S_IMODE(st.st_mode):04o}, no sticky "
            f"bit): they could swap a {kind} for a link; {fix}"
        )


def _writers(st: os.stat_result) -> str | None:
    """Who besides the folder's owner may write in it: "other users", "its group", or None.
    A user-private group (the owner's own, named after them, no other member: Debian's default
    with umask 002) lets no one else in."""
    if st.st_mode & 0o002:
        return "other users"
    if st.st_mode & 0o020 and not _private_group(st.st_uid, st.st_gid):
        return "its group"
    return None


def _private_group(uid: int, gid: int) -> bool:
    try:
        owner, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except KeyError:
        return False
    return (
        owner.pw_gid == gid
        and group.gr_name == owner.pw_name
        and set(group.gr_mem) <= {owner.pw_name}
    )
