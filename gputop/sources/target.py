"""The attached process as one identity: its PID and the time it started.

A PID is reused once its process is gone: on a busy box the kernel hands the number to the
next process within seconds. Every source that follows the target (host, stacks, agents) and
every key that acts on it (load the agent, dump stacks, capture) asks ``TargetId.alive`` first,
so none of them reads, samples or injects into the process that took the number after.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop.errors import CannotDo
from gputop.sources.procfs import GONE_STATES, parse_stat


class TargetNotFound(CannotDo):
    """The PID to attach to does not exist; the message is for the user."""

    when = "the PID to watch does not exist"


@dataclass(frozen=True)
class TargetId:
    """(pid, start time in clock ticks since boot): unique for the life of the machine."""

    pid: int
    start_ticks: int
    proc: str = "/proc"

    @classmethod
    def of(cls, pid: int, proc: str = "/proc") -> TargetId:
        """The process ``pid`` now (one that has just finished too: it is still that process,
        and ``alive`` says it ended); TargetNotFound (one line) when there is none."""
        start = start_of(pid, proc, finished=True)
        if start is None:
            raise TargetNotFound(
                f"no process with PID {pid} (it may have exited); check it with `ps -p {pid}`"
            )
        return cls(pid, start, proc)

    def alive(self) -> bool:
        """Still the process gputop attached to: running, and not a later one with its PID."""
        return start_of(self.pid, self.proc) == self.start_ticks

    def gone(self) -> str:
        """The line every refused action shows once the target is not ``alive``."""
        if start_of(self.pid, self.proc) is not None:
            return (
                f"pid {self.pid} has exited and its PID now belongs to another process: "
                "gputop does not follow it"
            )
        return f"pid {self.pid} has exited"


def start_of(pid: int, proc: str = "/proc", finished: bool = False) -> int | None:
    """The start time of running process ``pid``, or None (no such process, or finished:
    unless ``finished``, a zombie counts as gone)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            st = parse_stat(f.read(4096).decode(errors="replace"))
    except (OSError, ValueError, IndexError):
        return None
    return None if st.state in GONE_STATES and not finished else st.start_ticks
