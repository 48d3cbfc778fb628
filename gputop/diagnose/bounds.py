"""The bound registry: every bound class gputop can name, declared once.

An entry says what the bound is called, which rule finds it, which levers it suggests, where
it ranks in the verdict, which bounds it always explains, how the verdict pane styles it, and
what it means in one line. Everything else reads this table: the verdict (rule order, tiers,
what is explained, levers), the verdict pane (styles), the Prometheus state set (names), and a
test holds diagnose's JSON Schema's bound enum to it. ``tests/registry_check.py`` says what an
entry lacks; ARCHITECTURE.md has the recipe for adding one.

The order of ``REGISTRY`` is the rules' priority order: when two findings fire with equal
confidence in the same tier, the earlier is the principal (a hang explains everything; heat
and power caps slow every phase; a straggler explains the others' communication wait; an
oversubscribed CPU explains a slow loader).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace

from gputop.diagnose import bound_levers as levers
from gputop.diagnose import rules
from gputop.diagnose.findings import Finding
from gputop.diagnose.lever import declared
from gputop.diagnose.lever_fit import fitting
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.vocab import budget as slices
from gputop.vocab.bounds import (
    COMMS,
    CPU_OVERSUBSCRIBED,
    DATA_CPU_TRANSFORM,
    DATA_INPUT,
    DATA_IO,
    GPU_COMPUTE,
    H2D_COPY,
    HOST_MEMORY_PRESSURE,
    HOST_OVERHEAD,
    HUNG,
    IDLE,
    MEMORY_BANDWIDTH,
    SIDE_WORK,
    STRAGGLER,
    THROTTLED_POWER,
    THROTTLED_THERMAL,
)

Rule = Callable[[RuleInputs], Finding]
Levers = Callable[[RuleInputs, Budget | None], tuple[str, ...]]
"""A bound's levers from the rules' inputs and the step-time budget (None: none yet), which
sizes and orders them."""


class Tier(enum.IntEnum):
    """Where a fired bound ranks before confidence is compared."""

    FALLBACK = 0
    """The absence of a bottleneck: principal only when nothing else fires (so "util 100%" next
    to a hung collective or tiny kernels is never called compute-bound)."""
    NORMAL = 1
    OVERRIDE = 2
    """Explains everything else when it fires, however few sources agree; takes over at once
    (no hysteresis)."""


class PerGpu(enum.Enum):
    """Whether one GPU of several can show the bound alone (``verdict.on_each_gpu``)."""

    NO = "no"
    """A bound of the job (its steps, its processes), or of the board as a whole."""
    ALWAYS = "always"
    """Heat, power, DRAM: one GPU can be held while the others are not, and in a synchronous
    job that one GPU gates every rank."""
    GPU_VIEW = "gpu-view"
    """Read from NVML alone when nothing else speaks for the job (no agent): with the agent
    its steps say it for the job."""


class Style(enum.Enum):
    """How the verdict pane shows the bound when it is the principal."""

    GOOD = "good"
    NEUTRAL = "neutral"
    BAD = "bad"


@dataclass(frozen=True)
class Bound:
    """One bound class declared once: adding a bound is an entry, its rule, levers and tests."""

    name: str
    rule: Rule | None
    """Finds it. Variants that one rule tells apart (data-input/io) share their rule."""
    levers: Levers | None = None
    """What to try, cheapest first; called for a fired finding only."""
    tier: Tier = Tier.NORMAL
    explains: tuple[str, ...] = ()
    """Bounds it always explains when it fires (they rank after it and stay secondary); a rule
    whose reach depends on its evidence sets ``Finding.explains`` instead."""
    style: Style | None = None
    description: str = ""
    """One line: what the bound means."""
    per_gpu: PerGpu = PerGpu.NO
    """Asked of each GPU's readings when the board's means do not show it."""
    after_exit: bool = False
    """Still the principal once the target has exited: it says why the job ended (an OOM
    kill) or that it did. Every other bound read the job's last readings: it stays secondary
    (what the job was doing), never the verdict on a job that is gone."""
    slices: tuple[str, ...] = ()
    """The step-time budget's slices whose loss this bound names (``vocab/budget.py``): the
    verdict reads its rule when one of them is the largest loss."""
    stretches: bool = False
    """A cause that stretches a slice rather than taking time of its own (memory pressure, a
    CPU fight): principal, led by the slice, when its finding explains the slice's bound."""
    limits_compute: bool = False
    """May limit the compute of a compute-bound job (clocks cut, DRAM, threads on too few
    CPUs, tiny kernels): principal, led by the compute share, when no loss reaches the floor."""


REGISTRY: tuple[Bound, ...] = (
    Bound(
        HUNG,
        rules.hung,
        levers.hung,
        tier=Tier.OVERRIDE,
        style=Style.BAD,
        description="no step completes and main threads stay parked in a wait: the job is stuck",
        slices=(slices.STALL,),
    ),
    Bound(
        HOST_MEMORY_PRESSURE,
        rules.host_memory_pressure,
        levers.host_memory_pressure,
        style=Style.BAD,
        after_exit=True,
        description="the working set near the cgroup's memory limit: reclaim stalls, OOM kills",
        stretches=True,
    ),
    Bound(
        THROTTLED_THERMAL,
        rules.throttled_thermal,
        levers.throttled_thermal,
        per_gpu=PerGpu.ALWAYS,
        style=Style.BAD,
        description="SM clocks cut to keep the GPU cool",
        limits_compute=True,
    ),
    Bound(
        THROTTLED_POWER,
        rules.throttled_power,
        levers.throttled_power,
        per_gpu=PerGpu.ALWAYS,
        style=Style.BAD,
        description="SM clocks cut to stay under the power limit",
        limits_compute=True,
    ),
    Bound(
        STRAGGLER,
        rules.straggler,
        levers.straggler,
        explains=(COMMS,),
        style=Style.BAD,
        description="one rank works longer per step than the median rank; the others wait for it",
        slices=(slices.STRAGGLER,),
    ),
    Bound(
        CPU_OVERSUBSCRIBED,
        rules.cpu_oversubscribed,
        levers.cpu_oversubscribed,
        style=Style.BAD,
        description="more runnable threads than CPUs, or the cgroup's CPU quota throttled",
        stretches=True,
        limits_compute=True,
    ),
    Bound(
        DATA_INPUT,
        rules.data_input,
        levers.data_input,
        per_gpu=PerGpu.GPU_VIEW,
        style=Style.BAD,
        description="the GPU waits for the next batch",
        slices=(slices.DATA,),
    ),
    Bound(
        DATA_CPU_TRANSFORM,
        rules.data_input,
        levers.cpu_transform,
        style=Style.BAD,
        description="data-input, and preparing the batches (workers or main thread) is CPU-bound",
        slices=(slices.DATA,),
    ),
    Bound(
        DATA_IO,
        rules.data_input,
        levers.data_io,
        style=Style.BAD,
        description="data-input, and the job waits on storage to read the data",
        slices=(slices.DATA,),
    ),
    Bound(
        COMMS,
        rules.comms,
        levers.comms,
        style=Style.BAD,
        description="gradient communication not overlapped with compute",
        slices=(slices.COMMS,),
    ),
    Bound(
        H2D_COPY,
        rules.h2d_copy,
        levers.h2d_copy,
        per_gpu=PerGpu.GPU_VIEW,
        style=Style.BAD,
        description="host-to-device copies on the critical path",
        slices=(slices.H2D,),
    ),
    Bound(
        SIDE_WORK,
        rules.side_work,
        levers.side_work,
        style=Style.BAD,
        description="checkpoints, logging, eval or garbage collection stall steps periodically",
        slices=slices.SIDE,
    ),
    Bound(
        HOST_OVERHEAD,
        rules.host_overhead,
        levers.host_overhead,
        per_gpu=PerGpu.GPU_VIEW,
        style=Style.BAD,
        description="the GPU waits for the CPU to launch work: tiny kernels, per-step syncs",
        slices=(slices.LOOP,),
        limits_compute=True,
    ),
    Bound(
        MEMORY_BANDWIDTH,
        rules.memory_bandwidth,
        levers.memory_bandwidth,
        per_gpu=PerGpu.ALWAYS,
        style=Style.BAD,
        description="DRAM bandwidth is the limit while the tensor cores idle",
        limits_compute=True,
    ),
    Bound(
        GPU_COMPUTE,
        rules.gpu_compute,
        levers.gpu_compute,
        tier=Tier.FALLBACK,
        style=Style.GOOD,
        description="the GPU computes all the time at full clock (the good case)",
        slices=(slices.COMPUTE,),
    ),
    Bound(
        IDLE,
        rules.idle,
        levers.idle,
        tier=Tier.FALLBACK,
        style=Style.NEUTRAL,
        after_exit=True,
        description="nothing runs: GPU, CPU and stacks quiet with no steps, or the target exited",
    ),
)

BY_NAME: dict[str, Bound] = {b.name: b for b in REGISTRY}
NAMES: tuple[str, ...] = tuple(BY_NAME)
"""Every bound name a finding can carry, in registry order."""
RULES: tuple[Rule, ...] = tuple(dict.fromkeys(b.rule for b in REGISTRY if b.rule is not None))
"""Each rule once, at its first entry's place."""
SLICE_BOUNDS: dict[str, tuple[str, ...]] = {
    x: tuple(b.name for b in REGISTRY if x in b.slices) for x in slices.SLICES
}
"""The bounds that name each budget slice's loss, in registry order (data's variants: the one
its rule tells apart)."""
CAUSES: tuple[str, ...] = tuple(b.name for b in REGISTRY if b.stretches)
COMPUTE_LIMITS: tuple[str, ...] = tuple(b.name for b in REGISTRY if b.limits_compute)


def bound(name: str) -> Bound:
    """The entry of a finding's bound; a name no entry declares is a rule's mistake."""
    entry = BY_NAME.get(name)
    if entry is None:
        raise LookupError(
            f"a rule named the bound {name!r}, which has no entry in gputop/diagnose/bounds.py"
        )
    return entry


def judge(rule: Rule, sig: RuleInputs, budget: Budget | None = None) -> Finding:
    """The rule's finding; fired, with the levers of the bound it names."""
    f = rule(sig)
    if not f.fired:
        return f
    entry = bound(f.bound)
    # tests/registry_check.py says what an entry lacks (tests/unit/diagnose/test_bounds.py runs it)
    assert entry.levers is not None, f"{entry.name}: no levers"
    return replace(f, levers=levers_of(entry, sig, budget))


def levers_of(entry: Bound, sig: RuleInputs, budget: Budget | None) -> tuple[str, ...]:
    """The bound's levers that fit the job's setup, each saving from the bound's slice unless
    it declared its own."""
    if entry.levers is None:
        return ()
    own = declared(entry.levers(sig, budget), entry.slices[0] if entry.slices else None)
    return fitting(own, sig)
