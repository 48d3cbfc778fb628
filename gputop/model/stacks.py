"""Python stacks of the target's processes, each thread classified into a training phase."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

AGENT = "agent"
PY_SPY = "py-spy"


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame as py-spy names it; frozen, so frames can be counted across samples."""

    name: str
    file: str
    """py-spy's short_filename: package-relative (torch/utils/data/dataloader.py)."""
    line: int | None
    code: str = ""
    """The source line's text, read for a thread's innermost frame in the job's own code (the
    line that made the C call it is in: ``ids = WORD.findall(text.lower())``), "" elsewhere:
    a C function has no frame, and its call is what says the kind of work
    (``model/frame_kinds.py``)."""

    def __str__(self) -> str:
        return f"{self.file}:{self.name}" + (f":{self.line}" if self.line else "")


@dataclass(frozen=True, slots=True)
class SocketPeer:
    """The other end of a TCP or Unix socket a parked thread reads (``sources/sockets.py``)."""

    address: str
    """The remote address and port as the reader sees it; for a Unix socket the path either
    end is bound to ("@name" when abstract), else its peer's "socket:[inode]"."""
    pid: int | None
    """The job's process that holds the other end; None: another host, or outside the job."""
    on_host: bool
    """The other end is a socket of this host (its connection was found in the same table)."""
    transport: str = "TCP"
    """TCP, or Unix (a Unix socket's other end is always on this host)."""


@dataclass(frozen=True, slots=True)
class ThreadStack:
    """One thread in one dump, classified into a phase; ``deciding`` keeps the evidence for it."""

    tid: int
    name: str
    active: bool
    """py-spy's guess that the thread is running (not blocked or idle)."""
    frames: tuple[Frame, ...]
    """Innermost first."""
    phase: str
    deciding: Frame | None
    """The frame that decided the phase: the evidence shown next to it."""
    waits: str = ""
    """What the kernel says a parked thread of a process that stood still waits in ("futex",
    "read pipe:[123]", ``sources/syscalls.py``); "" when it runs or nothing was read."""
    writers: tuple[int, ...] | None = None
    """For a thread parked reading a pipe or FIFO: the processes of the job that hold a write
    end (the reader itself among them when it kept one); None when not looked at."""
    peer: SocketPeer | None = None
    """For a thread parked reading a TCP socket: who is at the other end; None when not looked
    at (or not a TCP connection)."""


@dataclass(frozen=True, slots=True)
class ProcessStacks:
    """One process's threads in one dump; a process that could not be read says why instead of
    vanishing."""

    pid: int
    role: str
    threads: tuple[ThreadStack, ...]
    error: str | None = None
    """Why this process could not be sampled, as an instruction."""
    dump_s: float | None = None
    rank: int | None = None
    """A rank's number when known (``model.roles.roles``)."""
    via: str = PY_SPY
    """Who read the stacks: the process's own agent (``AGENT``) or py-spy (``PY_SPY``)."""
    taken: float | None = None
    """When they were read, on the reading's clock: a process not read again since keeps its
    last stacks in later readings with the same ``taken`` (one read, counted once: ``reads``);
    None in recordings made before it was kept (every reading then a read)."""
    of_rank: int | None = None
    """For a child process (``CHILD``): the rank of the nearest rank above it, which started
    it (``model.host.rank_above``); it is shown as that rank's child, never as the rank."""

    def read_at(self, reading_t: float) -> float:
        """When these stacks were read: ``taken``, else the reading's own time."""
        return self.taken if self.taken is not None else reading_t

    def age(self, now: float) -> float | None:
        """Seconds since these stacks were read, as of ``now`` (a reading's ``t``)."""
        return None if self.taken is None else max(0.0, now - self.taken)


@dataclass(frozen=True, slots=True)
class StacksSample:
    """The stacks source's reading: one dump of every process of the target, a Timeline series."""

    target: int
    t: float
    wall: float
    processes: tuple[ProcessStacks, ...]
    problem: str | None = None
    """A problem with sampling as a whole (no py-spy), shown once."""

    @property
    def key(self) -> tuple[str, int]:
        return ("stacks", self.target)


def reads(window: Sequence[StacksSample]) -> Iterator[tuple[StacksSample, ProcessStacks]]:
    """(reading, process) for each read of a process in ``window``, once: a process not read
    again (py-spy's budget reads it less often than the readings come) is carried in later
    readings with the same ``taken``, and one read is one sample."""
    seen: dict[int, float] = {}
    for sample in window:
        for proc in sample.processes:
            if proc.taken is not None:
                if seen.get(proc.pid) == proc.taken:
                    continue
                seen[proc.pid] = proc.taken
            yield sample, proc


FUTEX = "futex"
"""The kernel wait of a lock, a condition or an event: only another thread (or process)
ends it."""
PIPE_READS = frozenset({"read", "readv"})
"""Calls a reader of a pipe or FIFO sleeps in until a writer writes or every write end closes."""


def pipe_read(waits: str) -> str | None:
    """The pipe or FIFO a kernel wait (``ThreadStack.waits``) reads: "pipe:[123]", a FIFO's
    path; None for anything else (a socket, an eventfd, no read)."""
    call, _, target = waits.partition(" ")
    if call not in PIPE_READS or not target or target.startswith(("socket:", "anon_inode:")):
        return None
    return target


SOCKET_READS = frozenset({"read", "readv", "recvfrom", "recvmsg"})
"""Calls a reader of a socket sleeps in until its peer sends."""


def socket_read(waits: str) -> int | None:
    """The inode of the socket a kernel wait (``ThreadStack.waits``) reads, else None."""
    call, _, target = waits.partition(" ")
    if call not in SOCKET_READS or not target.startswith("socket:[") or not target.endswith("]"):
        return None
    try:
        return int(target[len("socket:[") : -1])
    except ValueError:
        return None
