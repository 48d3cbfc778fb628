"""The target's process tree and cgroup over the window reduced to what the rules read: CPU
against the effective CPUs, DataLoader workers busy or waiting, memory against the limit and its
growth, each process's CPU for the hang rule. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop.diagnose.thresholds import MEM_NEAR, WORKER_PEGGED
from gputop.model import Window
from gputop.model.host import HostSample, LockWait, Sharer
from gputop.model.roles import MAIN


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


WORKERS_COMPUTE = 0.6
"""Mean CPU per DataLoader worker (cores) from which they count as computing, not waiting."""


@dataclass(frozen=True, slots=True)
class ProcessCpu:
    """One process of the target's tree over the last ``CPU_SPAN_S``: is it doing anything?"""

    pid: int
    role: str
    rank: int | None
    cores: float | None
    """Mean CPU (cores); None when no sample had it."""
    write_rate: float
    """Mean bytes/s written to storage (a checkpoint on a slow disk moves here, not on CPU)."""
    main_thread: float | None = None
    """Mean CPU (cores) of its main thread alone (None: not read): a main thread that keeps
    waking for work that arrives (a slow loader's batches) uses some; a blocked one none."""
    runq: float | None = None
    """Mean seconds per second its threads waited for a CPU (None: not read): a rank whose
    CPUs something else uses waits more than the others."""
    rss_growth: float | None = None
    """Bytes per second its resident memory grew over the whole window (None: under
    GROWTH_SPAN_S of readings)."""
    ppid: int = 0
    cmdline: str = ""
    """Its command line as /proc gave it (a child a hung process waits for is named by it)."""


CPU_SPAN_S = 6.0
"""How far back each process's CPU is averaged for the hang rule: three host readings at the
default 2-s interval, inside the 10-s stack span, so a process that stopped at the start of
that span reads as quiet by its end (each reading's CPU covers the interval before it)."""


@dataclass(frozen=True, kw_only=True)
class HostSignals:
    """The target's process tree and cgroup over the window, as the rules read them."""

    exited: bool
    effective_cpus: float | None
    cpu_source: str
    threads_running: float | None
    runq: float | None
    cpu_cores: float | None
    workers: int
    workers_pegged: int
    workers_busy: float | None
    """Mean CPU (cores) per DataLoader worker over the recent samples."""
    disk_wait: float
    throttled_ratio: float | None
    mem_working_set: int | None
    mem_limit: int | None
    oom_kills: int
    mem_limit_hits: float
    """Times per second the cgroup hit its memory limit lately (v1 failcnt, v2 "max")."""
    psi: Mapping[str, float]
    read_bytes_rate: float
    omp: str | None
    process_cpu: tuple[ProcessCpu, ...] = ()
    """Every process of the tree over the last CPU_SPAN_S (the hang rule's "no CPU")."""
    workers_demand: float | None = None
    """Mean CPU wanted per DataLoader worker (cores): its CPU plus its run-queue wait. A worker
    that computes wants a core whether or not it gets one; one that waits on reads wants none."""
    pool_threads: float | None = None
    """Runnable threads beyond one per process, on average: intra-op thread pools (torch, OMP,
    BLAS) rather than one thread per process (the main loop, each loader worker)."""
    processes: int = 0
    """Processes in the tree (main, ranks, workers, helpers) at the last running sample."""
    loader_kernel: float | None = None
    """Share of the data loader's CPU spent in the kernel (system time): the DataLoader
    workers', or the main process's when it has none. None while they use almost no CPU."""
    lock_waits: tuple[LockWait, ...] = ()
    """The tree's processes blocked on a file lock now, with each lock's holder."""
    sharers: tuple[Sharer, ...] = ()
    """The busiest processes outside the job, read while it waits for CPUs."""
    mem_growth: float | None = None
    """Bytes per second the cgroup's working set grew over the window (None: under
    GROWTH_SPAN_S of readings, or no working set)."""

    @classmethod
    def exited_only(cls, oom_kills: int = 0) -> HostSignals:
        """The window holds no running sample: the target is gone, and all that is known is
        whether the OOM killer ended it (the exited sample carries the last cgroup reading)."""
        return cls(
            exited=True,
            effective_cpus=None,
            cpu_source="",
            threads_running=None,
            runq=None,
            cpu_cores=None,
            workers=0,
            workers_pegged=0,
            workers_busy=None,
            disk_wait=0.0,
            throttled_ratio=None,
            mem_working_set=None,
            mem_limit=None,
            oom_kills=oom_kills,
            mem_limit_hits=0,
            psi={},
            read_bytes_rate=0.0,
            omp=None,
        )

    @property
    def mem_share(self) -> float | None:
        """Working set over the cgroup's memory limit, when there is a limit."""
        if not self.mem_limit or self.mem_working_set is None:
            return None
        return self.mem_working_set / self.mem_limit

    @property
    def cpu_wanted(self) -> float:
        """CPU the tree wants (cores): what it used plus its run-queue wait, so a job squeezed
        by a neighbour still counts as working."""
        return (self.cpu_cores or 0) + (self.runq or 0)

    @property
    def mem_near(self) -> bool:
        return (self.mem_share or 0) > MEM_NEAR

    @property
    def grower(self) -> ProcessCpu | None:
        """The process whose resident memory grew most over the window (None: none grew)."""
        top = max(self.process_cpu, key=lambda p: p.rss_growth or 0.0, default=None)
        return top if top is not None and (top.rss_growth or 0.0) > 0 else None


GROWTH_SPAN_S = 20.0
"""Seconds of host readings from which memory growth is a rate (fewer: one allocation)."""


def _growth(running: Sequence[HostSample]) -> tuple[float | None, dict[int, float]]:
    """The working set's growth rate and each process's resident memory growth (bytes per
    second) over the later half of the readings (the whole of them under twice
    GROWTH_SPAN_S): the rate now, not a start-up's allocations (a model, its gradients)
    averaged in; none under GROWTH_SPAN_S. Only readings of the cgroup the last one read
    count: a process moved into another (a launcher that sets a limit, systemd) would
    otherwise compare two cgroups' memory."""
    last = running[-1]
    where = last.cgroup.mem_limit_path if last.cgroup else None
    running = [h for h in running if (h.cgroup.mem_limit_path if h.cgroup else None) == where]
    if last.t - running[0].t >= 2 * GROWTH_SPAN_S:
        mid = (running[0].t + last.t) / 2
        running = [h for h in running if h.t >= mid]
    first = running[0]
    span = last.t - first.t
    if span < GROWTH_SPAN_S:
        return None, {}
    a = first.cgroup.mem_working_set_bytes if first.cgroup else None
    b = last.cgroup.mem_working_set_bytes if last.cgroup else None
    rate = (b - a) / span if a is not None and b is not None else None
    before = {p.pid: p.rss_bytes for p in first.processes if p.rss_bytes is not None}
    grown = {
        p.pid: (p.rss_bytes - before[p.pid]) / span
        for p in last.processes
        if p.rss_bytes is not None and p.pid in before
    }
    return rate, grown


def host_signals(window: Window[HostSample] | None) -> HostSignals | None:
    if window is None or not window.samples:
        return None
    running = [h for h in window.samples if h.state == "running"]
    latest = window.samples[-1]
    # the exited sample carries the last cgroup reading: a kill that ended the job counts
    kills = sum(h.cgroup.mem_events_new.get("oom_kill", 0) for h in window.samples if h.cgroup)
    if not running:
        return HostSignals.exited_only(kills)
    last = running[-1]
    recent = running[-10:]
    growth, grown = _growth(running)
    workers = last.workers
    pegged = sum(1 for w in workers if (w.cpu_cores or 0) >= WORKER_PEGGED)
    c = last.cgroup
    span = recent[-1].t - recent[0].t
    hits = (
        sum(h.cgroup.mem_events_new.get("max", 0) for h in recent[1:] if h.cgroup) / span
        if span > 0
        else 0.0
    )
    psi = {r: v.get("some_avg10", 0.0) for r, v in (c.psi.items() if c else ())}
    ratios = [
        h.cgroup.throttled_ratio
        for h in recent
        if h.cgroup and h.cgroup.throttled_ratio is not None
    ]
    return HostSignals(
        exited=latest.state == "exited",
        effective_cpus=last.effective_cpus,
        cpu_source=last.effective_cpus_source,
        threads_running=_mean([h.threads_running for h in recent if h.threads_running is not None]),
        runq=_mean([h.runq_wait for h in recent if h.runq_wait is not None]),
        cpu_cores=_mean([h.cpu_cores for h in recent if h.cpu_cores is not None]),
        workers=len(workers),
        workers_pegged=pegged,
        workers_busy=_mean(
            [sum(w.cpu_cores or 0 for w in h.workers) / len(h.workers) for h in recent if h.workers]
        ),
        disk_wait=_mean([sum(p.threads_disk_wait or 0 for p in h.processes) for h in recent])
        or 0.0,
        throttled_ratio=_mean(ratios),
        mem_working_set=c.mem_working_set_bytes if c else None,
        mem_limit=c.mem_limit_bytes if c else None,
        oom_kills=kills,
        mem_limit_hits=hits,
        psi=psi,
        read_bytes_rate=sum(p.read_bytes_rate or 0 for p in last.processes),
        omp=last.env.get("OMP_NUM_THREADS"),
        workers_demand=_mean(
            [
                sum((w.cpu_cores or 0) + (w.runq_wait or 0) for w in h.workers) / len(h.workers)
                for h in recent
                if h.workers
            ]
        ),
        pool_threads=_mean(
            [
                sum(max(0, (p.threads_running or 0) - 1) for p in h.processes)
                for h in recent
                if any(p.threads_running is not None for p in h.processes)
            ]
        ),
        processes=len(last.processes),
        loader_kernel=_kernel_share(recent),
        process_cpu=_process_cpu([h for h in running if h.t >= last.t - CPU_SPAN_S], grown),
        lock_waits=last.lock_waits,
        mem_growth=growth,
        sharers=last.sharers,
    )


KERNEL_MIN_CPU = 0.05
"""CPU (cores, on average) the loader must use before its kernel share means anything."""


def _kernel_share(samples: Sequence[HostSample]) -> float | None:
    """System time over CPU time of the loader: the DataLoader workers when the latest sample
    has some (samples from before they started do not count: the main process importing
    torch is no loader), else the main process."""
    if not samples:
        return None
    by_workers = bool(samples[-1].workers)
    cpu = kernel = 0.0
    n = 0
    for h in samples:
        if by_workers and not h.workers:
            continue
        loaders = h.workers if by_workers else tuple(p for p in h.processes if p.role == MAIN)
        for p in loaders:
            if p.cpu_cores is not None and p.kernel_cores is not None:
                cpu += p.cpu_cores
                kernel += p.kernel_cores
        n += 1
    if not n or cpu / n < KERNEL_MIN_CPU:
        return None
    return min(1.0, kernel / cpu)


def _process_cpu(
    samples: Sequence[HostSample], grown: Mapping[int, float] | None = None
) -> tuple[ProcessCpu, ...]:
    """Mean CPU, main-thread CPU and write rate per process over the samples, processes as the
    last one has them (a worker that exited earlier is not waited on)."""
    cpu: dict[int, list[float]] = {}
    main: dict[int, list[float]] = {}
    writes: dict[int, list[float]] = {}
    runq: dict[int, list[float]] = {}
    for h in samples:
        for p in h.processes:
            if p.cpu_cores is not None:
                cpu.setdefault(p.pid, []).append(p.cpu_cores)
            if p.runq_wait is not None:
                runq.setdefault(p.pid, []).append(p.runq_wait)
            if p.main_thread_cores is not None:
                main.setdefault(p.pid, []).append(p.main_thread_cores)
            writes.setdefault(p.pid, []).append(p.write_bytes_rate or 0.0)
    return tuple(
        ProcessCpu(
            p.pid,
            p.role,
            p.rank,
            _mean(cpu.get(p.pid, [])),
            _mean(writes[p.pid]) or 0.0,
            _mean(main.get(p.pid, [])),
            _mean(runq.get(p.pid, [])),
            (grown or {}).get(p.pid),
            p.ppid,
            p.cmdline,
        )
        for p in samples[-1].processes
    )
