"""Parsers for the /proc files the host source reads: pure functions of the file's text.

Direct /proc reads rather than psutil for the per-tick path: psutil counts context switches
for the main thread only, gives no thread states, and a fresh Process object reports 0% CPU;
and reading the few fields we need is cheaper than its general calls.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from gputop.model.roles import DATALOADER_WORKER, RANK_VARIABLES, ProcFacts

ENVIRON_LIMIT = 256 * 1024
"""Bytes of a process's environment read at most (a few KiB is usual; SLURM's is larger)."""

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True, slots=True)
class Stat:
    """The fields of ``/proc/P/stat`` the host source uses: CPU time, state and process identity."""

    pid: int
    comm: str
    state: str
    ppid: int
    cpu_s: float
    """utime + stime in seconds (for a process: all its threads)."""
    sys_s: float
    """stime alone: time in the kernel on the process's behalf (syscalls: opens, reads, stats)."""
    num_threads: int
    start_ticks: int
    """Start time after boot in clock ticks: with the PID, the identity of a process."""
    rss_bytes: int


def parse_stat(text: str) -> Stat:
    """``/proc/P/stat`` or ``/proc/P/task/T/stat``. comm may hold spaces and parentheses."""
    lparen = text.index("(")
    rparen = text.rindex(")")
    rest = text[rparen + 2 :].split()
    # rest[0] is field 3 (state); field n is rest[n - 3]
    return Stat(
        pid=int(text[:lparen]),
        comm=text[lparen + 1 : rparen],
        state=rest[0],
        ppid=int(rest[1]),
        cpu_s=(int(rest[11]) + int(rest[12])) / CLK_TCK,
        sys_s=int(rest[12]) / CLK_TCK,
        num_threads=int(rest[17]),
        start_ticks=int(rest[19]),
        rss_bytes=int(rest[21]) * PAGE,
    )


def parse_schedstat(text: str) -> tuple[float, float]:
    """(seconds on CPU, seconds waiting on a run queue) of one task."""
    parts = text.split()
    return int(parts[0]) / 1e9, int(parts[1]) / 1e9


def parse_ctx_switches(text: str) -> tuple[int, int]:
    """(voluntary, involuntary) context switches from ``/proc/P/task/T/status``."""
    vol = invol = 0
    for line in text.splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            vol = int(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches:"):
            invol = int(line.split()[1])
    return vol, invol


def parse_io(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if v.strip().isdigit():
            out[k.strip()] = int(v)
    return out


def parse_environ(raw: bytes) -> dict[str, str]:
    out = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def parse_smaps_rollup(text: str) -> dict[str, int]:
    """Pss and the private (unshared: USS) sizes, in bytes."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "kB":
            out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    uss = out.get("Private_Clean", 0) + out.get("Private_Dirty", 0)
    return {"pss": out.get("Pss", 0), "uss": uss}


SMALL_READ = 8192
"""One read() of this many bytes takes a whole stat, status or schedstat file."""


def read_bytes(path: str) -> bytes:
    """A small /proc file's bytes: ``os.open``/``os.read`` (half the cost of ``open()``'s
    buffered file object, on the path read hundreds of times a tick), more reads only when
    the first one filled its buffer."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, SMALL_READ)
        if len(data) < SMALL_READ:
            return data
        parts = [data]
        while chunk := os.read(fd, 1 << 16):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def _read(path: str) -> str:
    return read_bytes(path).decode(errors="replace")


def runs_python(pid: int, proc: str = "/proc") -> bool:
    """Whether ``pid`` runs a Python interpreter, by its binary's name (python3.11, python):
    a `sleep`, a shell or a compiled tool a job started has no Python stacks to read."""
    try:
        return os.path.basename(os.readlink(f"{proc}/{pid}/exe")).startswith("python")
    except OSError:
        return False


GONE_STATES = ("Z", "X")
"""/proc states of a process that has exited: a zombie its parent has not reaped yet (a child
that died while its parent hangs stays one: no stacks, no CPU, not a process that may still
move), or dead."""


def start_ticks(pid: int, proc: str = "/proc") -> int | None:
    """When ``pid`` started (clock ticks since boot), or None when it is gone or exited (a
    zombie not yet reaped counts as gone): with the pid, what names one process for good."""
    try:
        st = parse_stat(_read(f"{proc}/{pid}/stat"))
    except (OSError, ValueError, IndexError):
        return None
    return None if st.state in GONE_STATES else st.start_ticks


def children_of(pid: int, proc: str = "/proc", main_only: bool = False) -> list[int]:
    """Direct children: ``/proc/P/task/*/children`` (one small read per thread; with
    ``main_only`` the main thread's alone: where a training script, a launcher or a
    DataLoader starts its processes), or one pass over every ``/proc/*/stat`` on kernels
    built without those files."""
    task = f"{proc}/{pid}/task"
    try:
        tids = [str(pid)] if main_only else os.listdir(task)
    except OSError:
        return []
    if tids and _has_children_files(proc, f"{task}/{tids[0]}/children"):
        kids: list[int] = []
        for tid in tids:
            try:
                kids += [int(x) for x in _read(f"{task}/{tid}/children").split()]
            except (OSError, ValueError):
                continue
        return kids
    kids = []
    for entry in os.listdir(proc):
        if entry.isdigit():
            try:
                if parse_stat(_read(f"{proc}/{entry}/stat")).ppid == pid:
                    kids.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return kids


_CHILDREN_FILES: dict[str, bool] = {}
"""proc root -> the kernel has ``/proc/P/task/T/children`` (CONFIG_PROC_CHILDREN): asked once."""


def _has_children_files(proc: str, probe: str) -> bool:
    known = _CHILDREN_FILES.get(proc)
    if known is None:
        known = _CHILDREN_FILES[proc] = os.path.exists(probe)
    return known


def descendants(pid: int, proc: str = "/proc") -> list[int]:
    """``pid`` and every process below it."""
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack += children_of(p, proc)
    return out


def read_environ(
    pid: int, proc: str = "/proc", limit: int = ENVIRON_LIMIT
) -> dict[str, str] | None:
    """A process's environment as it was started (``/proc/P/environ``: later ``os.environ``
    changes are not in it), at most ``limit`` bytes (a cut last entry is dropped); None when
    it cannot be read (another user's process, or gone)."""
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            raw = f.read(limit)
    except OSError:
        return None
    if len(raw) >= limit:
        raw = raw[: raw.rfind(b"\0") + 1]
    return parse_environ(raw)


MAX_CMDLINE = 64 * 1024
"""Bytes of a command line read (a launcher's can be long; none needs more to be told apart)."""


def read_cmdline(pid: int, proc: str = "/proc") -> str:
    """The command line, arguments joined by spaces; "" when unreadable (a kernel thread, a
    zombie, gone)."""
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            raw = f.read(MAX_CMDLINE)
    except OSError:
        return ""
    return " ".join(p.decode(errors="replace") for p in raw.split(b"\0") if p)


def tree_facts(
    pid: int,
    proc: str = "/proc",
    known: Mapping[tuple[int, int], ProcFacts] | None = None,
    main_only: bool = False,
) -> list[ProcFacts]:
    """What the role rule reads about ``pid`` and every process below it, parents before
    children. A process in ``known`` (by pid and start time) keeps its command line and
    environment (read once: both are fixed at exec); its name and parent are read again
    (a DataLoader worker names itself after it starts). ``main_only``: children found from
    each process's main thread only (``children_of``), none from a DataLoader worker (64 on
    an 8-rank job, rarely a parent), and the known processes that another thread or a worker
    started kept while they live."""
    out: list[ProcFacts] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            st = parse_stat(_read(f"{proc}/{p}/stat"))
        except (OSError, ValueError, IndexError):
            continue
        if st.state in GONE_STATES and p != pid:
            continue  # exited, not yet reaped: no stacks, no CPU, no children of its own
        old = known.get((p, st.start_ticks)) if known else None
        if old is None:
            env = read_environ(p, proc)
            kept = {k: env[k] for k in RANK_VARIABLES if k in env} if env is not None else None
            old = ProcFacts(p, st.start_ticks, st.ppid, st.comm, read_cmdline(p, proc), kept)
        elif (old.comm, old.ppid) != (st.comm, st.ppid):
            old = replace(old, comm=st.comm, ppid=st.ppid)
        out.append(old)
        if not (main_only and st.comm.startswith(DATALOADER_WORKER)):
            stack += children_of(p, proc, main_only)
    if main_only and known:  # what other threads started, seen by the last full walk
        found = {f.pid for f in out}
        parents = found.copy()
        for f in known.values():  # parents before children, as they were found
            if f.pid not in found and f.ppid in parents:
                now = start_ticks(f.pid, proc)
                if now == f.start_ticks:  # None for a zombie: gone
                    out.append(f)
                    found.add(f.pid)
                    parents.add(f.pid)
    return out
