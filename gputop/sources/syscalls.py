"""What the kernel says a parked thread waits in: /proc/PID/task/TID/syscall names the
system call a blocked thread sleeps in and its arguments (proc(5); readable by whoever may
ptrace the process, as py-spy needs anyway). A Python frame at `with lock:` or `sock.recv()`
shows only the line; the call tells a lock (futex) from a socket read or a sleep, and a
descriptor argument names the pipe or socket (its /proc/PID/fd link). Read bounded; a
thread that ended or a call this table does not know reads as ""."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator

from gputop.model.shown import printable
from gputop.sources.procfs import read_bytes

SYSCALLS: dict[str, dict[int, str]] = {
    "x86_64": {
        0: "read", 1: "write", 7: "poll", 19: "readv", 23: "select", 35: "nanosleep",
        42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
        47: "recvmsg", 61: "wait4", 72: "fcntl", 73: "flock", 202: "futex",
        230: "clock_nanosleep", 232: "epoll_wait", 247: "waitid", 270: "pselect6",
        271: "ppoll", 281: "epoll_pwait", 288: "accept4",
    },
    "aarch64": {
        22: "epoll_pwait", 25: "fcntl", 32: "flock", 63: "read", 64: "write", 65: "readv",
        72: "pselect6", 73: "ppoll", 95: "waitid", 98: "futex", 101: "nanosleep",
        115: "clock_nanosleep", 202: "accept", 203: "connect", 206: "sendto",
        207: "recvfrom", 211: "sendmsg", 212: "recvmsg", 242: "accept4", 260: "wait4",
    },
}  # fmt: skip
"""System call numbers (the kernel's tables for each architecture) of the waits a parked
thread is found in."""
ON_FD = frozenset({
    "read", "write", "readv", "recvfrom", "recvmsg", "sendto", "sendmsg", "accept", "accept4",
    "connect", "fcntl", "flock",
})  # fmt: skip
"""Calls whose first argument is the descriptor waited on."""
MAX_FDINFO = 256
"""Bytes of an fdinfo file read: its flags are on the second line."""
MAX_TARGET = 120
"""Characters of a descriptor's target kept (a path may be long and crafted)."""


def table(machine: str | None = None) -> dict[int, str]:
    return SYSCALLS.get(machine or platform.machine(), {})


def parse_syscall(text: str, calls: dict[int, str]) -> tuple[str, int | None] | None:
    """(call name, first argument) from a syscall file's line; None when the thread runs, is
    not in a call, or the call is not in ``calls``."""
    parts = text.split()
    if not parts or parts[0] == "running":
        return None
    try:
        number = int(parts[0])
        first = int(parts[1], 16) if len(parts) > 1 else None
    except ValueError:
        return None
    name = calls.get(number)
    return (name, first) if name is not None else None


def waits_in(pid: int, tid: int, proc: str = "/proc", calls: dict[int, str] | None = None) -> str:
    """ "futex", "read pipe:[123]", "recvfrom socket:[45]", "clock_nanosleep"; "" when unknown."""
    try:
        raw = read_bytes(f"{proc}/{pid}/task/{tid}/syscall")
    except OSError:
        return ""
    got = parse_syscall(raw.decode("ascii", "replace"), table() if calls is None else calls)
    if got is None:
        return ""
    name, first = got
    if name not in ON_FD or first is None or not 0 <= first < 1 << 31:
        return name
    try:
        target = os.readlink(f"{proc}/{pid}/fd/{first}")
    except OSError:
        return name
    return f"{name} {printable(target, MAX_TARGET)}"


MAX_FDS = 1024
"""Open files of one process looked at for a pipe's write end."""
WRITE_MODES = (1, 2)
"""O_WRONLY, O_RDWR: an open file that can write (fdinfo's ``flags``, octal, low two bits)."""


def _can_write(proc: str, pid: int, fd: str) -> bool:
    try:
        with open(f"{proc}/{pid}/fdinfo/{fd}", "rb") as f:
            text = f.read(MAX_FDINFO).decode("ascii", "replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags:"):
            try:
                return int(line.split()[1], 8) & 3 in WRITE_MODES
            except (IndexError, ValueError):
                return False
    return False


def holding(target: str, pids: list[int], proc: str = "/proc") -> Iterator[tuple[int, str]]:
    """(pid, descriptor) for each open file of ``pids`` whose /proc/PID/fd link reads
    ``target`` ("pipe:[123]", "socket:[45]", a path), at most MAX_FDS looked at a process."""
    for pid in pids:
        base = f"{proc}/{pid}/fd"
        try:
            names = os.listdir(base)[:MAX_FDS]
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"{base}/{name}") == target:
                    yield pid, name
            except OSError:
                continue


def pipe_writers(target: str, pids: list[int], proc: str = "/proc") -> tuple[int, ...]:
    """The processes among ``pids`` that hold a write end of the pipe or FIFO ``target``
    (as its /proc/PID/fd link reads): a reader waits for them, or for ever when none but
    itself is left."""
    out: list[int] = []
    for pid, fd in holding(target, pids, proc):
        if pid not in out and _can_write(proc, pid, fd):
            out.append(pid)
    return tuple(out)
