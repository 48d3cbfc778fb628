"""Map the PIDs NVML reports (host PIDs, even inside containers) into gputop's PID namespace.

``/proc/<pid>/status`` has an ``NSpid:`` line listing the process's PID in every namespace from
the one this /proc belongs to down to its own. So when gputop runs on the host, a containerised
trainer NVML calls 41234 shows ``NSpid: 41234 17``: the same process is PID 17 in its container.
When gputop itself runs in a container, host PIDs do not exist in its /proc at all, and the
honest answer is to say so (and how to fix it), not "No Such Process".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

NOT_VISIBLE = (
    "not in this PID namespace: NVML reports host PIDs; run gputop on the host "
    "or in a container started with --pid=host"
)


@dataclass(frozen=True)
class PidMapping:
    """A PID NVML reported, as gputop can use it: the PID here (None: not visible), in its
    container, and a note for the screen."""

    pid: int
    local_pid: int | None
    container_pid: int | None
    note: str | None


def read_nspids(pid: int, proc_root: Path) -> list[int] | None:
    """The NSpid chain of ``pid`` as this /proc sees it, or None when there is no such PID."""
    try:
        text = (proc_root / str(pid) / "status").read_text()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    except PermissionError:
        return [pid]
    for line in text.splitlines():
        if line.startswith("NSpid:"):
            try:
                return [int(x) for x in line.split()[1:]]
            except ValueError:
                return [pid]
    return [pid]  # kernels before 4.1 have no NSpid line: one namespace as far as we can tell


def map_pid(pid: int, proc_root: Path = Path("/proc")) -> PidMapping:
    chain = read_nspids(pid, proc_root)
    if chain is None:
        return PidMapping(pid=pid, local_pid=None, container_pid=None, note=NOT_VISIBLE)
    if len(chain) > 1 and chain[-1] != pid:
        return PidMapping(
            pid=pid,
            local_pid=pid,
            container_pid=chain[-1],
            note=f"in a container as PID {chain[-1]}",
        )
    return PidMapping(pid=pid, local_pid=pid, container_pid=None, note=None)


class PidMapper:
    """``map_pid`` with a cache that forgets PIDs NVML no longer reports (PIDs get reused)."""

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self.proc_root = proc_root
        self._cache: dict[int, PidMapping] = {}
        self._seen: set[int] = set()

    def __call__(self, pid: int) -> PidMapping:
        self._seen.add(pid)
        hit = self._cache.get(pid)
        if hit is None:
            hit = self._cache[pid] = map_pid(pid, self.proc_root)
        return hit

    def end_tick(self) -> None:
        """Drop PIDs that were not asked about since the last call."""
        for pid in set(self._cache) - self._seen:
            del self._cache[pid]
        self._seen.clear()
