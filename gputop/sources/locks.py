"""Who holds the file locks the job's processes wait for: /proc/locks lists every lock with
its holder's pid and the file's device and inode, each waiter on a `->` line after the lock it
waits for (proc(5); `lslocks` reads the same). The file's path comes from the waiter's own open
files (the descriptor it is locking). Read bounded: the file may be long on a busy machine, and
another user's command line is only shown, never trusted."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import NamedTuple

from gputop.model.host import LockWait
from gputop.model.shown import MAX_SHOWN, printable

LOCKS_PATH = "/proc/locks"
MAX_LOCKS_BYTES = 256 * 1024
"""At most this much of /proc/locks is read (thousands of locks)."""
MAX_FDS = 1024
"""A waiter's open files looked at for the locked file's path."""
MAX_CMD = MAX_SHOWN
"""Characters of a holder's command line kept."""


class LockLine(NamedTuple):
    """One line of /proc/locks."""

    number: int
    waiting: bool
    """A `->` line: this pid waits for the lock the number names."""
    kind: str
    pid: int
    device: tuple[int, int]
    """major, minor"""
    inode: int


def parse_locks(text: str) -> list[LockLine]:
    """The lines of /proc/locks that parse; anything else is skipped."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or not parts[0].endswith(":"):
            continue
        waiting = parts[1] == "->"
        fields = parts[2:] if waiting else parts[1:]
        if len(fields) < 5:
            continue
        kind, _, _, pid, where = fields[:5]
        dev = where.split(":")
        try:
            number = int(parts[0][:-1])
            major, minor, inode = int(dev[0], 16), int(dev[1], 16), int(dev[2])
            out.append(LockLine(number, waiting, kind, int(pid), (major, minor), inode))
        except (ValueError, IndexError):
            continue
    return out


class Blocked(NamedTuple):
    """A process of the job waiting for a lock, and the line of that lock's holder."""

    waiter: int
    held: LockLine


def blocked(lines: Iterable[LockLine], job: set[int]) -> list[Blocked]:
    """The waits of the job's processes, each with the lock it waits for: the `->` lines follow
    the line of the lock they wait for, under the same number."""
    holders: dict[int, LockLine] = {}
    out = []
    for x in lines:
        if not x.waiting:
            holders[x.number] = x
        elif x.pid in job and x.number in holders:
            out.append(Blocked(x.pid, holders[x.number]))
    return out


def read_locks(path: str = LOCKS_PATH) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_LOCKS_BYTES).decode("ascii", errors="replace")
    except OSError:
        return ""


def path_of(pid: int, device: tuple[int, int], inode: int, proc: str = "/proc") -> str | None:
    """The file with that device and inode among ``pid``'s open files (None: not open there)."""
    fds = f"{proc}/{pid}/fd"
    try:
        names = os.listdir(fds)[:MAX_FDS]
    except OSError:
        return None
    for name in names:
        try:
            st = os.stat(f"{fds}/{name}")
        except OSError:
            continue
        if st.st_ino == inode and (os.major(st.st_dev), os.minor(st.st_dev)) == device:
            try:
                return printable(os.readlink(f"{fds}/{name}"), 4 * MAX_CMD)
            except OSError:
                return None
    return None


def lock_waits(
    job: set[int],
    cmdline: Callable[[int], str],
    text: str | None = None,
    proc: str = "/proc",
) -> tuple[LockWait, ...]:
    """Each process of ``job`` blocked on a file lock, with the holder and the file."""
    found = blocked(parse_locks(read_locks() if text is None else text), job)
    out = []
    for b in found:
        h = b.held
        holder = h.pid if h.pid > 0 else None  # OFD locks: -1, no owning process
        out.append(
            LockWait(
                waiter=b.waiter,
                kind=h.kind,
                holder=holder,
                holder_cmd=printable(cmdline(holder)) if holder is not None else "",
                holder_in_job=holder in job,
                path=path_of(b.waiter, h.device, h.inode, proc),
            )
        )
    return tuple(out)
