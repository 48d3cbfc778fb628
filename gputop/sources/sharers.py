"""Which processes outside the job take CPU from it: the machine's busiest processes that are
not the job's, each with the CPUs it may run on. Reading every process's /proc/PID/stat costs
about 30 us a process (2 ms for 75 here; 15-60 ms on a box with 500-2000), so the scan runs
only while a process of the job waits for a CPU (its run-queue wait, measured each tick) and
then at most every SCAN_S: a job that gets its CPUs pays nothing."""

from __future__ import annotations

import os
from collections.abc import Callable

from gputop.model.host import Sharer
from gputop.model.shown import printable
from gputop.sources.procfs import parse_stat, read_bytes, read_cmdline

CROWDED_RUNQ = 0.10
"""Run-queue wait (seconds a second) of one of the job's processes from which the machine is
scanned for the processes that take its CPUs."""
SCAN_S = 10.0
"""Seconds between two scans while the job waits for CPUs."""
FIRST_S = 2.0
"""Seconds after a first scan (its CPU times only a baseline) to the second, which measures."""
KEEP_S = 60.0
"""Seconds the last sharers stay reported after the job stops waiting for CPUs."""
BUSY_CORES = 0.2
"""A process outside the job using this much of a core is a sharer worth naming."""
MAX_SHARERS = 5
"""Sharers kept per scan, busiest first."""
MAX_PIDS = 65536
"""Processes looked at in one scan at most (a pid space is bounded; /proc listing is not)."""


def _cpu(proc: str, pid: str) -> tuple[int, float, str] | None:
    """(start ticks, CPU seconds, comm) of one process; None when it is gone or unreadable."""
    try:
        st = parse_stat(read_bytes(f"{proc}/{pid}/stat").decode("utf-8", "replace"))
    except (OSError, ValueError, IndexError):
        return None
    return st.start_ticks, st.cpu_s, st.comm


def _cpus(pid: int) -> tuple[int, ...] | None:
    try:
        return tuple(sorted(os.sched_getaffinity(pid)))
    except OSError:
        return None


class SharerScan:
    """The scan's state between two readings: each process's CPU time at the last scan."""

    def __init__(
        self, proc: str = "/proc", cpus: Callable[[int], tuple[int, ...] | None] = _cpus
    ) -> None:
        self._proc = proc
        self._cpus = cpus
        self._last: dict[tuple[int, int], float] = {}
        self._at: float | None = None
        self._crowded_at: float | None = None
        self.found: tuple[Sharer, ...] = ()
        self._measured = False
        """A scan has measured (not only a baseline): the next waits SCAN_S, found or not."""

    def read(self, job: set[int], crowded: set[int], now: float) -> tuple[Sharer, ...]:
        """The sharers as last measured; a new scan when processes of the job wait for CPUs
        (``crowded``: their pids) and the last is old enough."""
        if crowded:
            self._crowded_at = now
        elif self._crowded_at is None or now - self._crowded_at > KEEP_S:
            self.found, self._last, self._at, self._measured = (), {}, None, False
            return self.found
        due = SCAN_S if self._measured else FIRST_S  # a baseline is followed soon
        if crowded and (self._at is None or now - self._at >= due or now < self._at):
            self._scan(job, crowded, now)
        return self.found

    def _scan(self, job: set[int], crowded: set[int], now: float) -> None:
        seen: dict[tuple[int, int], float] = {}
        busy: list[tuple[float, int, str]] = []
        span = now - self._at if self._at is not None else None
        try:
            names = os.listdir(self._proc)[:MAX_PIDS]
        except OSError:
            names = []
        for name in names:
            if not name.isdigit():
                continue
            pid = int(name)
            got = _cpu(self._proc, name)
            if got is None:
                continue
            start, cpu_s, comm = got
            seen[(pid, start)] = cpu_s
            before = self._last.get((pid, start))
            if pid in job or before is None or not span:
                continue
            cores = (cpu_s - before) / span
            if cores >= BUSY_CORES:
                busy.append((cores, pid, comm))
        self._last, self._at = seen, now
        if span is None:
            return  # a baseline: nothing measured yet
        self._measured = True
        busy.sort(reverse=True)
        theirs = {pid: self._cpus(pid) for pid in sorted(crowded)}
        found = []
        for cores, pid, comm in busy[:MAX_SHARERS]:
            cpus = self._cpus(pid)
            shares = tuple(
                j
                for j, mine in theirs.items()
                if cpus is None or mine is None or set(cpus) & set(mine)
            )
            found.append(
                Sharer(
                    pid=pid,
                    name=printable(comm, 32),
                    cmdline=printable(read_cmdline(pid, self._proc), 120),
                    cores=cores,
                    cpus=cpus,
                    shares_with=shares,
                )
            )
        self.found = tuple(found)
