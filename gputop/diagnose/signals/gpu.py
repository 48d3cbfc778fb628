"""The GPU windows of every device reduced to the means and shares the rules read, with each
GPU's own when a board has several (one throttled GPU among eight vanishes in the means). Pure."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gputop.diagnose.thresholds import LOWERED_LIMIT
from gputop.model import DeviceInfo, GpuSample, Window
from gputop.model.gpu import GpuProcess
from gputop.vocab.reasons import POWER_REASONS, THERMAL_REASONS


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
