"""Reduce windows of samples to the handful of numbers the rules reason about. Pure.

Each source is optional: a rule asks for the signals it needs and records which were missing.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gputop.model import DeviceInfo, GpuSample, Window
from gputop.model.host import HostSample
from gputop.model.stack_stats import thread_shares, unchanged_stacks
from gputop.model.stacks import StacksSample
from gputop.model.step_stats import peak_flops, phase_shares, usable, work_ns
from gputop.model.steps import AgentsSample, AgentState, StepRecord

POWER_REASONS = frozenset({"sw_power_cap", "hw_power_brake"})
THERMAL_REASONS = frozenset({"sw_thermal", "hw_thermal", "hw_slowdown"})


@dataclass(frozen=True)
class GpuSignals:
    gpus: int
    util: float
    sm_active: float | None
    tensor: float | None
    dram: float | None
    util_mem: float | None
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


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def gpu_signals(
    windows: Sequence[Window[GpuSample]], devices: Sequence[DeviceInfo]
) -> GpuSignals | None:
    by_index = {d.index: d for d in devices}
    samples = [s for w in windows for s in w.samples if s.lost is None]
    if len(samples) < 2:
        return None
    util = [s.util_gpu_pct for s in samples if s.util_gpu_pct is not None]
    ratios, powers = [], []
    lowered = False
    for s in samples:
        d = by_index.get(s.index)
        if d and d.max_sm_clock_mhz and s.sm_clock_mhz is not None and "gpu_idle" not in s.reasons:
            ratios.append(s.sm_clock_mhz / d.max_sm_clock_mhz)
        if s.power_w is not None and s.power_limit_w:
            powers.append(s.power_w / s.power_limit_w)
        if d and d.default_power_limit_w and s.power_limit_w:
            lowered |= s.power_limit_w < 0.95 * d.default_power_limit_w
    busy = [s for s in samples if "gpu_idle" not in s.reasons] or samples
    throttled_power = sum(1 for s in busy if POWER_REASONS & set(s.reasons)) / len(busy)
    throttled_thermal = sum(1 for s in busy if THERMAL_REASONS & set(s.reasons)) / len(busy)
    temps = [s.temp_c for s in samples if s.temp_c is not None]
    slow = [d.temp_slowdown_c for d in devices if d.temp_slowdown_c is not None]
    mean_util = _mean(util) or 0.0
    cv = statistics.pstdev(util) / mean_util if len(util) > 2 and mean_util > 0 else 0.0
    rx = [s.pcie_rx_kbps / 1e6 for s in samples if s.pcie_rx_kbps is not None]

    def opt(field_name: str) -> float | None:
        return _mean(
            [getattr(s, field_name) for s in samples if getattr(s, field_name) is not None]
        )

    return GpuSignals(
        gpus=len({s.index for s in samples}),
        util=mean_util,
        sm_active=opt("sm_active_pct"),
        tensor=opt("tensor_active_pct"),
        dram=opt("dram_bw_pct"),
        util_mem=opt("util_mem_pct"),
        clock_ratio=_mean(ratios),
        power_ratio=_mean(powers),
        limit_lowered=lowered,
        power_throttled=throttled_power,
        thermal_throttled=throttled_thermal,
        hottest=max(temps) if temps else None,
        slowdown=min(slow) if slow else None,
        util_cv=cv,
        pcie_rx_gbps=_mean(rx),
        names=tuple(sorted({d.name or "?" for d in devices})),
    )


@dataclass(frozen=True)
class HostSignals:
    exited: bool
    effective_cpus: float | None
    cpu_source: str
    threads_running: float | None
    runq: float | None
    cpu_cores: float | None
    workers: int
    workers_pegged: int
    disk_wait: float
    throttled_ratio: float | None
    mem_working_set: int | None
    mem_limit: int | None
    oom_kills: int
    psi: Mapping[str, float]
    read_bytes_rate: float
    omp: str | None


def host_signals(window: Window[HostSample] | None) -> HostSignals | None:
    if window is None or not window.samples:
        return None
    running = [h for h in window.samples if h.state == "running"]
    latest = window.samples[-1]
    if not running:
        return HostSignals(
            True, None, "", None, None, None, 0, 0, 0.0, None, None, None, 0, {}, 0.0, None
        )
    last = running[-1]
    recent = running[-10:]
    workers = last.workers
    pegged = sum(1 for w in workers if (w.cpu_cores or 0) >= 0.85)
    c = last.cgroup
    kills = sum(h.cgroup.mem_events_new.get("oom_kill", 0) for h in running if h.cgroup)
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
        disk_wait=_mean([sum(p.threads_disk_wait or 0 for p in h.processes) for h in recent])
        or 0.0,
        throttled_ratio=_mean(ratios),
        mem_working_set=c.mem_working_set_bytes if c else None,
        mem_limit=c.mem_limit_bytes if c else None,
        oom_kills=kills,
        psi=psi,
        read_bytes_rate=sum(p.read_bytes_rate or 0 for p in last.processes),
        omp=last.env.get("OMP_NUM_THREADS"),
    )


@dataclass(frozen=True)
class StepSignals:
    ranks: int
    steps: int
    median_ms: float
    p90_ms: float
    cv: float
    shares: dict[str, float]
    spikes: tuple[tuple[int, float, str], ...]
    """(step, ms, the phase that grew most) for steps over 2x the median."""
    work_ms: dict[int, float]
    sync_ms: dict[int, float]
    open_phase: str | None
    open_age_s: float | None
    since_step_s: float | None
    fingerprint: Mapping[str, object]
    mfu: float | None
    agents: tuple[AgentState, ...] = field(default_factory=tuple)


def _spikes(steps: Sequence[StepRecord], median_ns: float) -> tuple[tuple[int, float, str], ...]:
    out = []
    typical: dict[str, float] = {}
    for s in steps:
        for k, v in s.phases.items():
            typical.setdefault(k, []).append(v)  # type: ignore[attr-defined]
    med = {k: statistics.median(v) for k, v in typical.items()}  # type: ignore[arg-type]
    for s in steps:
        if s.dur_ns > 2 * median_ns:
            grown = max(
                s.phases.items(), key=lambda kv: kv[1] - med.get(kv[0], 0), default=("?", 0)
            )
            out.append((s.step, s.dur_ns / 1e6, grown[0]))
    return tuple(out)


def step_signals(agents: AgentsSample | None, gpu_names: Sequence[str] = ()) -> StepSignals | None:
    if agents is None:
        return None
    ranked = [a for a in agents.agents if a.rank is not None or len(a.steps) > 1]
    if not ranked:
        return None
    main = next((a for a in ranked if a.rank in (0, None)), ranked[0])
    steps = usable(main.steps)
    if len(steps) < 3:
        return StepSignals(
            len(ranked),
            len(steps),
            0,
            0,
            0,
            {},
            (),
            {},
            {},
            main.open_phase,
            main.open_age_s,
            main.since_step_s,
            main.fingerprint,
            None,
            tuple(ranked),
        )
    durs = sorted(s.dur_ns for s in steps)
    med = statistics.median(durs)
    mean = statistics.fmean(durs)
    cv = statistics.pstdev(durs) / mean if mean else 0.0
    work, sync = {}, {}
    for a in ranked:
        st = usable(a.steps)
        if st:
            key = a.rank if a.rank is not None else a.pid
            work[key] = statistics.median(work_ns(s) for s in st) / 1e6
            sync[key] = statistics.median(s.phases.get("grad_sync", 0) for s in st) / 1e6
    flops = [s.flops for s in steps]
    peak = next((peak_flops(n) for n in gpu_names if peak_flops(n)), None)
    mfu = None
    if peak and all(f is not None for f in flops):
        mfu = sum(flops) / (sum(s.dur_ns for s in steps) / 1e9) / peak  # type: ignore[arg-type]
    return StepSignals(
        ranks=len(ranked),
        steps=len(steps),
        median_ms=med / 1e6,
        p90_ms=durs[int(0.9 * (len(durs) - 1))] / 1e6,
        cv=cv,
        shares=dict(phase_shares(steps)),
        spikes=_spikes(steps, med),
        work_ms=work,
        sync_ms=sync,
        open_phase=main.open_phase,
        open_age_s=main.open_age_s,
        since_step_s=main.since_step_s,
        fingerprint=main.fingerprint,
        mfu=mfu,
        agents=tuple(ranked),
    )


@dataclass(frozen=True)
class StackSignals:
    samples: int
    main_shares: dict[str, float]
    """Phase shares of the main threads of the main process and ranks."""
    worker_fetch: float | None
    unchanged: tuple[tuple[int, int, str, str | None], ...]
    """(pid, samples, phase, parked frame)"""
    errors: tuple[str, ...]


def stack_signals(window: Window[StacksSample] | None) -> StackSignals | None:
    if window is None or not window.samples:
        return None
    shares = [s for s in thread_shares(window.samples) if s.name == "MainThread"]
    mains = [s for s in shares if s.role != "worker"]
    workers = [s for s in shares if s.role == "worker"]
    total = sum(s.samples for s in mains)
    combined: dict[str, float] = {}
    for s in mains:
        for phase, share in s.shares:
            combined[phase] = combined.get(phase, 0.0) + share * s.samples / max(total, 1)
    fetch = (
        sum(dict(s.shares).get("fetch/transform", 0.0) for s in workers) / len(workers)
        if workers
        else None
    )
    unchanged = tuple(
        (u.pid, u.samples, u.phase, u.parked.name if u.parked else None)
        for u in unchanged_stacks(window.samples)
    )
    errors = tuple({p.error for s in window.samples[-1:] for p in s.processes if p.error})
    return StackSignals(total, combined, fetch, unchanged, errors)
