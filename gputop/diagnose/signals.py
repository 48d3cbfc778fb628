"""Reduce windows of samples to the handful of numbers the rules reason about. Pure.

Each source is optional: a rule asks for the signals it needs and records which were missing.
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gputop.model import DeviceInfo, GpuSample, Window
from gputop.model.gpu import GpuProcess
from gputop.model.host import MAIN, WORKER, HostSample, LockWait, Sharer
from gputop.model.ranks import RankWork, main_agent, rank_work, ranked
from gputop.model.stack_stats import (
    MainPhases,
    OwnCode,
    Stillness,
    main_phases,
    own_code,
    stillness,
    thread_shares,
    user_frame,
    waits_in,
    worker_mains,
)
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.model.step_stats import Mfu, gc_share, loop_share, mfu_of, phase_shares, tail_ms, usable
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.vocab import steps as step
from gputop.vocab.reasons import POWER_REASONS, THERMAL_REASONS

if TYPE_CHECKING:
    from gputop.diagnose.budget import Budget


@dataclass(frozen=True, kw_only=True)
class GpuSignals:
    """The GPU windows of every device reduced to the few means and shares the rules read."""

    gpus: int
    util: float
    sm_active: float | None
    tensor: float | None
    dram: float | None
    clock_ratio: float | None
    power_ratio: float | None
    limit_lowered: bool
    power_throttled: float
    thermal_throttled: float
    hottest: float | None
    slowdown: int | None
    util_cv: float
    pcie_rx_gbps: float | None
    names: tuple[str, ...]
    span_s: float = 0.0
    """Seconds from the oldest reading in the windows to the newest."""
    util_recent: float | None = None
    """Mean utilisation over the last RECENT_S of the window only: a job that started computing
    a few seconds ago is busy now, while the window's mean still counts the quiet start."""
    sm_recent: float | None = None
    """SMs busy (%, GPM) over the same last RECENT_S."""
    per_gpu: tuple[tuple[int, GpuSignals], ...] = ()
    """(index, that GPU's readings alone) for each GPU of a board of several: one GPU
    throttled among eight vanishes in the board's means (``verdict.on_each_gpu``)."""
    pids: frozenset[int] = frozenset()
    """Processes on these GPUs at their latest reading that listed any, as gputop's /proc
    sees them: which GPU a rank computes on, and who else does."""


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


LOWERED_LIMIT = 0.95
"""An enforced power limit under this share of the card's default is a box capped on purpose."""
RECENT_S = 3.0
"""The recent part of the GPU window (``GpuSignals.util_recent``)."""
MAX_PER_GPU = 128
"""Readings per GPU the means are taken over: a long window is thinned evenly, so the cost of
a verdict does not grow with the window."""


def _avg(total: float, n: int) -> float | None:
    return total / n if n else None


def gpu_signals(
    windows: Sequence[Window[GpuSample]], devices: Sequence[DeviceInfo]
) -> GpuSignals | None:
    """One pass over every reading in the windows, with plain local accumulators: the verdict
    runs on every refresh, over up to minutes of readings of every GPU."""
    max_clock = {d.index: d.max_sm_clock_mhz for d in devices}
    default_limit = {d.index: d.default_power_limit_w for d in devices}
    n_util = n_sm = n_tensor = n_dram = n_ratio = n_power = n_rx = 0
    t_util = sq_util = t_sm = t_tensor = t_dram = t_ratio = t_power = t_rx = 0.0
    busy = throttled_power = throttled_thermal = count = 0
    n_recent = n_sm_recent = 0
    t_recent = t_sm_recent = 0.0
    end = max((w.samples[-1].t for w in windows if w.samples), default=0.0)
    start = min((w.samples[0].t for w in windows if w.samples), default=0.0)
    lowered = False
    hottest = None
    seen = set()
    listed: dict[int, tuple[GpuProcess, ...]] = {}
    v: float | None
    for w in windows:
        samples = w.samples
        if len(samples) > MAX_PER_GPU:  # evenly spaced, newest kept: means need no more
            stride = math.ceil(len(samples) / MAX_PER_GPU)
            samples = samples[::-stride]
        for s in samples:
            if s.lost is not None:
                continue
            count += 1
            i = s.index
            seen.add(i)
            v = s.util_gpu_pct
            if v is not None:
                n_util += 1
                t_util += v
                sq_util += v * v
                if s.t > end - RECENT_S:
                    n_recent += 1
                    t_recent += v
            v = s.sm_active_pct
            if v is not None:
                n_sm += 1
                t_sm += v
                if s.t > end - RECENT_S:
                    n_sm_recent += 1
                    t_sm_recent += v
            v = s.tensor_active_pct
            if v is not None:
                n_tensor += 1
                t_tensor += v
            v = s.dram_bw_pct
            if v is not None:
                n_dram += 1
                t_dram += v
            reasons = s.reasons
            if "gpu_idle" not in reasons:
                busy += 1
                top = max_clock.get(i)
                if top and s.sm_clock_mhz is not None:
                    n_ratio += 1
                    t_ratio += s.sm_clock_mhz / top
                if reasons:
                    throttled_power += any(r in POWER_REASONS for r in reasons)
                    throttled_thermal += any(r in THERMAL_REASONS for r in reasons)
            limit = s.power_limit_w
            if s.power_w is not None and limit:
                n_power += 1
                t_power += s.power_w / limit
                default = default_limit.get(i)
                if default and limit < LOWERED_LIMIT * default:
                    lowered = True
            v = s.temp_c
            if v is not None and (hottest is None or v > hottest):
                hottest = v
            v = s.pcie_rx_kbps
            if v is not None:
                n_rx += 1
                t_rx += v
            if s.processes:  # the slow tier lists them: the latest list per GPU stands
                listed[i] = s.processes
    if count < 2:
        return None
    mean_util = t_util / n_util if n_util else 0.0
    var = sq_util / n_util - mean_util**2 if n_util else 0.0
    cv = (max(0.0, var) ** 0.5) / mean_util if n_util > 2 and mean_util > 0 else 0.0
    slow = [d.temp_slowdown_c for d in devices if d.temp_slowdown_c is not None]
    denom = busy or count
    return GpuSignals(
        gpus=len(seen),
        util=mean_util,
        sm_active=_avg(t_sm, n_sm),
        tensor=_avg(t_tensor, n_tensor),
        dram=_avg(t_dram, n_dram),
        clock_ratio=_avg(t_ratio, n_ratio),
        power_ratio=_avg(t_power, n_power),
        limit_lowered=lowered,
        power_throttled=throttled_power / denom,
        thermal_throttled=throttled_thermal / denom,
        hottest=hottest,
        slowdown=min(slow) if slow else None,
        util_cv=cv,
        pcie_rx_gbps=t_rx / n_rx / 1e6 if n_rx else None,
        names=tuple(sorted({d.name or "?" for d in devices})),
        span_s=end - start,
        pids=frozenset(p.local_pid for ps in listed.values() for p in ps if p.local_pid),
        util_recent=_avg(t_recent, n_recent),
        sm_recent=_avg(t_sm_recent, n_sm_recent),
    )


MEM_NEAR = 0.9
"""Working set over this share of the cgroup limit: one allocation spike from an OOM kill."""
WORKERS_COMPUTE = 0.6
"""Mean CPU per DataLoader worker (cores) from which they count as computing, not waiting."""
WORKERS_WAIT = 0.3
"""... and below which they count as waiting (remote reads, an API): more of them help."""
WORKER_PEGGED = 0.85
"""CPU (cores) from which one DataLoader worker counts as pegged."""


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


@dataclass(frozen=True, slots=True)
class Spike:
    """A step over SPIKE x the median step and what made it long, read by name by side-work."""

    step: int
    ms: float
    grew: str
    """What grew most: a phase, "unmarked", or "gc" / "gc (full collections)" when garbage
    collection covers most of the excess."""


@dataclass(frozen=True, kw_only=True)
class StepSignals:
    """The main rank's recent steps (and every rank's work time) as the rules read them."""

    ranks: int
    steps: int
    median_ms: float = 0
    cv: float = 0
    shares: dict[str, float] = field(default_factory=dict)
    spikes: tuple[Spike, ...] = ()
    open_phase: str | None
    open_age_s: float | None
    since_step_s: float | None
    fingerprint: Mapping[str, object]
    mfu: float | None = None
    agents: tuple[AgentState, ...] = field(default_factory=tuple)
    mfu_detail: Mfu | None = None
    """MFU with the precision and peak it was computed against, or why it was not."""
    gc_share: float | None = None
    """Share of step time in Python garbage collection (None: the agent did not time it), over
    the spike window (``spike_steps``): full collections come every few hundred steps, so the
    median's window would mostly miss the ones the spikes are made of."""
    gc_full: int = 0
    """Full (generation 2) collections in those steps."""
    rank_work: RankWork | None = None
    """Per-rank work and sync wait and the slowest rank: the straggler definition (model)."""
    p99_ms: float = 0
    """The 99th percentile step (of the steps the agent keeps, about the slowest): the job's
    own longest normal step, which a hang is judged against."""
    spike_steps: int = 0
    """Steps the spikes were looked for in (``SPIKE_STEPS``, ``SPIKE_WINDOW_S``; 0: ``steps``)."""
    spike_median_ms: float = 0
    """The median step of those (0: ``median_ms``)."""
    loop_share: float = 0.0
    """The typical step's share outside the phases the agent marks (``step_stats.loop_share``):
    the loop's own Python between batches, such as per-step metrics and logging."""


SPIKE = 1.5
"""A step longer than this many median steps is a spike."""
GC_OF_EXCESS = 0.5
"""A spike whose excess over the median step is at least this much more GC than a typical
step's is a GC spike: a collection pauses whatever phase it lands in, so that phase grows too."""


def _spikes(steps: Sequence[StepRecord], median_ns: float) -> tuple[Spike, ...]:
    """Each spike with what grew most: "gc" or "gc (full collections)" when the step's extra
    GC time covers most of its excess, else the phase that grew most ("unmarked" included)."""

    def parts(s: StepRecord) -> dict[str, float]:
        d: dict[str, float] = dict(s.phases)
        d["unmarked"] = s.unaccounted_ns
        return d

    every = [parts(s) for s in steps]
    names = {k for p in every for k in p}
    # a phase missing from a step took 0 ns there: a checkpoint phase seen only in the spikes
    # has a typical time of 0, not the spikes' own
    med = {k: statistics.median(p.get(k, 0) for p in every) for k in names}
    gc_med = statistics.median(s.gc_ns or 0 for s in steps) if steps else 0
    out = []
    for s in steps:
        if s.dur_ns > SPIKE * median_ns:
            excess = s.dur_ns - median_ns
            if s.gc_ns is not None and s.gc_ns - gc_med >= GC_OF_EXCESS * excess:
                gc = "gc (full collections)" if s.gc_full else "gc"
                out.append(Spike(s.step, s.dur_ns / 1e6, gc))
                continue
            grew, _ = max(parts(s).items(), key=lambda kv: kv[1] - med.get(kv[0], 0.0))
            out.append(Spike(s.step, s.dur_ns / 1e6, grew))
    return tuple(out)


SPIKE_STEPS = 512
SPIKE_WINDOW_S = 120.0
"""Spikes are looked for over the last SPIKE_STEPS steps of the last SPIKE_WINDOW_S (at least
the statistics' own window): periodic side work (an eval every 100 steps, a checkpoint every
minute) needs a window of several periods, or its spikes enter and leave the window and the
evidence comes and goes with them."""


def _spike_window(main: AgentState, steps: list[StepRecord]) -> list[StepRecord]:
    longer = long_window(main)
    return longer if len(longer) > len(steps) else steps


def long_window(agent: AgentState) -> list[StepRecord]:
    """The agent's usable steps of the last SPIKE_WINDOW_S, SPIKE_STEPS at most: the window
    periodic side work shows in (the spikes, the GC share and the step-time budget)."""
    longer = usable(agent.steps, window=SPIKE_STEPS)
    if not longer:
        return longer
    cut = longer[-1].t0_ns + longer[-1].dur_ns - SPIKE_WINDOW_S * 1e9
    if longer[0].t0_ns >= cut:
        return longer  # all of it within the time (512 steps of under 0.23 s)
    return [s for s in longer if s.t0_ns >= cut]


_LAST_STEPS: list[tuple[AgentsSample, tuple[str, ...], StepSignals | None]] = []
"""The last reading's step signals, kept with the very reading they came from (an identity
check): the verdict runs after every reading of any source, the agents' reading changes once
a second, and its spikes and per-rank medians walk up to 512 steps per rank."""


def step_signals(agents: AgentsSample | None, gpu_names: Sequence[str] = ()) -> StepSignals | None:
    """The agents' reading reduced (``_step_signals``), once per reading."""
    if agents is None:
        return None
    names = tuple(gpu_names)
    if _LAST_STEPS and _LAST_STEPS[0][0] is agents and _LAST_STEPS[0][1] == names:
        return _LAST_STEPS[0][2]
    out = _step_signals(agents, names)
    _LAST_STEPS[:] = [(agents, names, out)]
    return out


def _step_signals(agents: AgentsSample, gpu_names: Sequence[str]) -> StepSignals | None:
    ranked_agents = ranked(agents)
    main = main_agent(ranked_agents)
    if main is None:
        return None
    steps = usable(main.steps)
    if len(steps) < 3:
        return StepSignals(  # too few steps for statistics: who is there and where it is
            ranks=len(ranked_agents),
            steps=len(steps),
            open_phase=main.open_phase,
            open_age_s=main.open_age_s,
            since_step_s=main.since_step_s,
            fingerprint=main.fingerprint,
            agents=tuple(ranked_agents),
        )
    durs = sorted(s.dur_ns for s in steps)
    med = statistics.median(durs)
    mean = statistics.fmean(durs)
    cv = statistics.pstdev(durs) / mean if mean else 0.0
    longer = _spike_window(main, steps)
    long_med = statistics.median(s.dur_ns for s in longer) if longer is not steps else med
    per_rank = rank_work(ranked_agents)
    mfu = mfu_of(steps, gpu_names, main.fingerprint)
    gc, gc_full = gc_share(longer)
    return StepSignals(
        ranks=len(ranked_agents),
        steps=len(steps),
        median_ms=med / 1e6,
        cv=cv,
        shares=dict(phase_shares(steps)),
        spikes=_spikes(longer, long_med),
        open_phase=main.open_phase,
        open_age_s=main.open_age_s,
        since_step_s=main.since_step_s,
        fingerprint=main.fingerprint,
        mfu=mfu.value,
        mfu_detail=mfu,
        agents=tuple(ranked_agents),
        gc_share=gc,
        gc_full=gc_full,
        rank_work=per_rank,
        p99_ms=tail_ms(durs, 0.99),
        spike_steps=len(longer),
        spike_median_ms=long_med / 1e6,
        loop_share=loop_share(steps, (step.OTHER,)),
    )


@dataclass(frozen=True, kw_only=True)
class StackSignals:
    """The stack dumps of the window reduced to phase shares and parked main threads."""

    samples: int
    main_shares: dict[str, float]
    """Phase shares of the main threads of the main process and ranks."""
    errors: tuple[str, ...]
    still: tuple[Stillness, ...] = ()
    """Every main and rank process's current run of one main-thread stack (the hang rule)."""
    workers_at: tuple[tuple[int, Frame | None, Frame | None], ...] = ()
    """(pid, innermost frame, innermost frame outside the stdlib) of each DataLoader worker's
    main thread as last dumped: where a worker that does nothing sits."""
    own_code: OwnCode | None = None
    """The main threads' time in the job's own code outside every training phase (logging,
    metrics, Python between batches) once they train, and where (``stack_stats.own_code``)."""
    per_process: tuple[MainPhases, ...] = ()
    """Each main and rank process's main-thread phases since it began to train (the budget)."""
    last: tuple[ProcessStacks, ...] = ()
    """The latest reading's processes, every thread: what a hang's other threads do."""

    def threads_of(self, pid: int) -> tuple[ThreadStack, ...]:
        """``pid``'s threads in the latest reading (none when it was not read, or failed)."""
        proc = next((p for p in self.last if p.pid == pid and not p.error), None)
        return proc.threads if proc is not None else ()


def stack_signals(window: Window[StacksSample] | None) -> StackSignals | None:
    if window is None or not window.samples:
        return None
    shares = thread_shares(window.samples, main_only=True)
    mains = [s for s in shares if s.role != WORKER]
    total = sum(s.samples for s in mains)
    combined: dict[str, float] = {}
    for s in mains:
        for phase, share in s.shares:
            combined[phase] = combined.get(phase, 0.0) + share * s.samples / max(total, 1)
    errors = tuple({p.error for s in window.samples[-1:] for p in s.processes if p.error})
    workers_at = tuple(
        (pid, waits_in(t, by_phase=False), user_frame(t.frames))
        for pid, t in worker_mains(window.samples).items()
    )
    return StackSignals(
        samples=total,
        main_shares=combined,
        errors=errors,
        still=tuple(stillness(window.samples)),
        workers_at=workers_at,
        own_code=own_code(window.samples),
        per_process=tuple(main_phases(window.samples)),
        last=window.samples[-1].processes,
    )


@dataclass(frozen=True)
class RuleInputs:
    """Everything a rule and a bound's levers may read: one reduction per source (None: none)."""

    gpu: GpuSignals | None
    host: HostSignals | None
    steps: StepSignals | None
    stacks: StackSignals | None
    holding: str | None = None
    """The principal the verdict shows now (``verdict.State``), set by ``evaluate``: a rule
    keeps its own bound while the evidence stays above the lower end of its band (rules.HOLD)."""
    budget: Budget | None = None
    """Where the step's time goes (``diagnose/budget.py``), set by ``evaluate`` before the
    rules run, so the levers order themselves by the time they would save."""

    @property
    def gpu_view(self) -> bool:
        """Only NVML speaks: no target attached (the plain monitor, the demo's board)."""
        return self.steps is None and self.host is None and self.stacks is None


_Readings = tuple[tuple[GpuSample, ...], ...]
_LAST_BOARD: list[tuple[_Readings, tuple[DeviceInfo, ...], GpuSignals | None]] = []
"""The last board's signals, kept with the very readings they came from (each checked one by
one, by identity): the verdict runs after every reading of any source, a GPU's window
changes once a tick, and one pass walks every reading of every GPU."""


def board_signals(
    gpus: Sequence[Window[GpuSample]], devices: Sequence[DeviceInfo]
) -> GpuSignals | None:
    """The board's signals with each GPU's own (``gpu_signals``), once per GPU reading."""
    readings = tuple(w.samples for w in gpus)
    devs = tuple(devices)
    if _LAST_BOARD:
        kept, kept_devs, out = _LAST_BOARD[0]
        if kept_devs == devs and len(kept) == len(readings) and all(map(_same, kept, readings)):
            return out
    board = gpu_signals(gpus, devices)
    if board is not None and len(gpus) > 1:
        each = ((d.index, gpu_signals([w], [d])) for w, d in zip(gpus, devices, strict=False))
        board = replace(board, per_gpu=tuple((i, g) for i, g in each if g is not None))
    _LAST_BOARD[:] = [(readings, devs, board)]
    return board


def _same(a: tuple[GpuSample, ...], b: tuple[GpuSample, ...]) -> bool:
    return a is b or (len(a) == len(b) and all(map(operator.is_, a, b)))


def reduce_windows(
    gpus: Sequence[Window[GpuSample]],
    devices: Sequence[DeviceInfo],
    host: Window[HostSample] | None = None,
    agents: AgentsSample | None = None,
    stacks: Window[StacksSample] | None = None,
) -> RuleInputs:
    """The windows of every source -> the rules' inputs (the MFU needs the GPUs' names)."""
    names = [d.name for d in devices if d.name]
    return RuleInputs(
        gpu=board_signals(gpus, devices),
        host=host_signals(host),
        steps=step_signals(agents, names),
        stacks=stack_signals(stacks),
    )
