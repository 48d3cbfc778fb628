"""What the host does for the attached process tree: processes, threads, cgroup, pressure.

As for GPUs, a value that could not be read is None and its name is a key of ``na`` with the
reason ("needs same user or root"). Rates are per second over the last interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

_NONE: Mapping[str, str] = MappingProxyType({})

DATALOADER_WORKER = "pt_data_worker"
PIN_MEMORY_THREAD = "pt_data_pin"


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """One thread as /proc shows it; a process's running and disk-wait counts come from these."""

    tid: int
    name: str
    state: str
    """R running, S sleeping, D disk wait (uninterruptible), Z zombie, T stopped, ..."""
    cpu_cores: float | None


@dataclass(frozen=True, slots=True)
class ProcSample:
    """One process of the attached tree, so a DataLoader worker is seen apart from the target."""

    pid: int
    start_ticks: int
    ppid: int
    name: str
    cmdline: str
    role: str
    """main (the target), worker (a DataLoader worker), or child (anything else below it)."""
    state: str
    cpu_cores: float | None
    rss_bytes: int | None
    uss_bytes: int | None
    pss_bytes: int | None
    num_threads: int
    threads_running: int | None
    threads_disk_wait: int | None
    threads: tuple[ThreadInfo, ...]
    runq_wait: float | None
    """Seconds spent waiting for a CPU per second, summed over the threads: 2.0 means on
    average two threads were ready to run but had no CPU."""
    ctx_voluntary_rate: float | None
    ctx_involuntary_rate: float | None
    read_chars_rate: float | None
    read_bytes_rate: float | None
    write_bytes_rate: float | None
    open_fds: int | None
    na: Mapping[str, str] = field(default_factory=lambda: _NONE)


@dataclass(frozen=True, slots=True)
class CgroupSample:
    """What the target's cgroup allows it, and its use: often far less than the machine has."""

    version: str
    cpu_quota_cpus: float | None
    cpu_quota_path: str | None
    cpu_usage_cores: float | None
    throttled_ratio: float | None
    """Share of CFS periods in which the cgroup was throttled, over the last interval."""
    throttled_s_per_s: float | None
    mem_limit_bytes: int | None
    mem_limit_path: str | None
    mem_current_bytes: int | None
    mem_working_set_bytes: int | None
    """Usage minus inactive page cache: what counts toward an OOM kill."""
    mem_events: Mapping[str, int]
    mem_events_new: Mapping[str, int]
    """Events since the previous reading (high, max, oom, oom_kill)."""
    swap_bytes: int | None
    psi_scope: str
    """cgroup (v2, this cgroup's own), system (/proc/pressure), or none."""
    psi: Mapping[str, Mapping[str, float]]
    """resource -> some_avg10 / full_avg10 (percent)."""
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HostSample:
    """One reading of what the host gives the attached tree: the host's side of the evidence."""

    pid: int
    t: float
    wall: float
    state: str
    """running, or exited (the target is gone; ``exit_code`` when gputop launched it)."""
    exit_code: int | None
    processes: tuple[ProcSample, ...]
    effective_cpus: float | None
    effective_cpus_source: str
    affinity_cpus: int | None
    cgroup: CgroupSample | None
    env: Mapping[str, str]
    na: Mapping[str, str] = field(default_factory=lambda: _NONE)

    @property
    def key(self) -> tuple[str, int]:
        return ("host", self.pid)

    @property
    def main(self) -> ProcSample | None:
        return next((p for p in self.processes if p.role == "main"), None)

    @property
    def workers(self) -> tuple[ProcSample, ...]:
        return tuple(p for p in self.processes if p.role == "worker")

    @property
    def threads_running(self) -> int | None:
        counts = [p.threads_running for p in self.processes if p.threads_running is not None]
        return sum(counts) if counts else None

    @property
    def runq_wait(self) -> float | None:
        waits = [p.runq_wait for p in self.processes if p.runq_wait is not None]
        return sum(waits) if waits else None

    @property
    def cpu_cores(self) -> float | None:
        cores = [p.cpu_cores for p in self.processes if p.cpu_cores is not None]
        return sum(cores) if cores else None
