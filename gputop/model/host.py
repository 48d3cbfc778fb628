"""What the host does for the attached process tree: processes, threads, cgroup, pressure.

As for GPUs, a value that could not be read is None and its name is a key of ``na`` with the
reason ("needs same user or root"). Rates are per second over the last interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gputop.model.roles import MAIN, RANK, WORKER

_NONE: Mapping[str, str] = MappingProxyType({})


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
    """main (the target), rank (a training process a launcher started: ``roles``), worker
    (a DataLoader worker), or child (anything else below it)."""
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
    rank: int | None = None
    """The global rank when known (its agent, its launcher's variables, or spawn order); for
    ranks, and for a target that is itself one rank of a job."""
    local_rank: int | None = None
    world_size: int | None = None
    kernel_cores: float | None = None
    """The part of ``cpu_cores`` spent in the kernel (system time): syscalls such as opening and
    reading files. A loader that reads many small files spends most of its CPU here."""
    main_thread_cores: float | None = None
    """CPU of the process's main thread alone (tid = pid), to the nanosecond: a thread blocked
    for good uses none; one that wakes for each batch of a slow loader uses a few ms a second."""


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
class LockWait:
    """A process of the job blocked on a file lock, and who holds that lock (/proc/locks)."""

    waiter: int
    """The job's process that waits (pid)."""
    kind: str
    """FLOCK, POSIX or OFDLCK, as /proc/locks names it."""
    holder: int | None
    """The holder's pid (None: an open-file-description lock, which has no owning pid)."""
    holder_cmd: str
    """Its command line (bounded, printable), "" when unreadable."""
    holder_in_job: bool
    """The holder is a process of the attached tree."""
    path: str | None
    """The locked file, from the waiter's open files (None: not found among them)."""


@dataclass(frozen=True, slots=True)
class Sharer:
    """A busy process outside the job, read while the job waits for CPUs
    (``sources/sharers.py``): what may take them."""

    pid: int
    name: str
    cmdline: str
    """Bounded and printable: another user's command line is only shown."""
    cores: float
    """CPU it used between the last two scans (cores)."""
    cpus: tuple[int, ...] | None
    """The CPUs it may run on (its affinity); None when unreadable."""
    shares_with: tuple[int, ...] = ()
    """The job's processes waiting for CPUs whose allowed CPUs overlap its own (all of them
    when either affinity is unreadable)."""


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
    lock_waits: tuple[LockWait, ...] = ()
    """Processes of the tree blocked on a file lock, with its holder (``sources/locks.py``)."""
    sharers: tuple[Sharer, ...] = ()
    """The busiest processes outside the job while it waits for CPUs (``sources/sharers``)."""

    @property
    def key(self) -> tuple[str, int]:
        return ("host", self.pid)

    @property
    def main(self) -> ProcSample | None:
        return next((p for p in self.processes if p.role == MAIN), None)

    @property
    def workers(self) -> tuple[ProcSample, ...]:
        return tuple(p for p in self.processes if p.role == WORKER)

    @property
    def ranks(self) -> tuple[ProcSample, ...]:
        return tuple(p for p in self.processes if p.role == RANK)

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
