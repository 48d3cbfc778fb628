"""Scripted workloads for the simulated board: what a training job does to the GPU over time.

Each scenario is an activity curve plus the board settings it needs (a lowered power limit, bad
cooling). They are deliberately drawn from the signatures in docs/facts/bounds.md, not from any
test case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gputop.sim.activity import IDLE, Activity, ActivityFn, constant
from gputop.sim.boards import SimConfigError
from gputop.vocab.steps import COMPUTE_PHASES


@dataclass(frozen=True)
class Scenario:
    """A scripted workload and the board settings it needs: a bound to show without a real job."""

    key: str
    summary: str
    activity: ActivityFn
    power_limit_frac: float = 1.0
    """Enforced power limit as a fraction of the default (a capped rental box)."""
    cooling: float = 1.0
    """Thermal resistance multiplier (2.0: clogged heatsink, failed fan)."""
    mem_used_frac: float = 0.0
    """Share of the usable frame buffer the workload holds (model, activations, caches)."""
    per_device: tuple[Scenario, ...] = ()
    """When set, device i runs ``per_device[i % len]`` (its activity, limit, cooling, memory)."""

    def for_device(self, index: int) -> Scenario:
        return self.per_device[index % len(self.per_device)] if self.per_device else self


COMPUTE = Activity(duty=0.99, sm=0.93, occupancy=0.55, tensor=0.70, dram=0.45, pcie_rx=0.01)
MEMBW = Activity(duty=0.99, sm=0.60, occupancy=0.35, tensor=0.05, dram=0.92, pcie_rx=0.01)


WAITING = Activity(duty=0.02, sm=0.01, pcie_rx=0.005)
PAGEABLE_COPY = Activity(duty=0.08, sm=0.03, occupancy=0.01, dram=0.10, pcie_rx=0.30)
"""Copies from pageable memory: the driver stages them through a pinned bounce buffer, so the
link carries a fraction of its peak while the SMs wait for the batch to land."""


def _sawtooth(period_s: float, busy_s: float, busy: Activity, rest: Activity = WAITING):
    """Short bursts of compute between long waits (for the next batch, or for its copy)."""

    def fn(t: float, _i: int) -> Activity:
        phase = math.fmod(t, period_s)
        return busy if phase < busy_s else rest

    return fn


SCENARIOS: dict[str, Scenario] = {
    s.key: s
    for s in (
        Scenario("idle", "nothing running: idle clocks, GpuIdle reason", constant(IDLE)),
        Scenario(
            "compute",
            "healthy compute-bound training: SMs and tensor cores busy, clock near max",
            constant(COMPUTE),
            mem_used_frac=0.86,
        ),
        Scenario(
            "membw",
            "memory-bandwidth bound: DRAM near peak, tensor cores mostly idle",
            constant(MEMBW),
            mem_used_frac=0.71,
        ),
        Scenario(
            "power-throttled",
            "compute-bound on a board whose power limit was lowered to 60%: SW power cap",
            constant(COMPUTE),
            power_limit_frac=0.6,
            mem_used_frac=0.86,
        ),
        Scenario(
            "thermal-throttled",
            "compute-bound with poor cooling: temperature reaches the slowdown threshold",
            constant(COMPUTE),
            cooling=2.6,
            mem_used_frac=0.86,
        ),
        Scenario(
            "starved",
            "input-starved: 0.3 s bursts of compute every 1.2 s (sawtooth utilisation)",
            _sawtooth(1.2, 0.3, COMPUTE),
            mem_used_frac=0.42,
        ),
        Scenario(
            "h2d",
            "host-to-device copies on the critical path: pageable copies fill 1.15 s of every "
            "1.3 s, PCIe receive busy, SMs idle meanwhile; 0.15 s of compute",
            _sawtooth(1.3, 0.15, COMPUTE, PAGEABLE_COPY),
            mem_used_frac=0.5,
        ),
        Scenario(
            "launch-bound",
            "tiny kernels back to back: utilisation 100% but few SMs busy, low power",
            constant(Activity(duty=1.0, sm=0.12, occupancy=0.05, tensor=0.02, dram=0.08)),
            mem_used_frac=0.18,
        ),
    )
}


def _mixed(parts: tuple[Scenario, ...]) -> ActivityFn:
    return lambda t, i: parts[i % len(parts)].activity(t, i)


_MIX = tuple(
    SCENARIOS[k]
    for k in (
        "compute",
        "membw",
        "power-throttled",
        "thermal-throttled",
        "starved",
        "launch-bound",
        "compute",
        "idle",
    )
)
SCENARIOS["mixed"] = Scenario(
    "mixed",
    "a different workload on each GPU: compute, membw, power- and thermal-throttled, "
    "starved, launch-bound, compute, idle",
    _mixed(_MIX),
    per_device=_MIX,
)


class UnknownScenario(SimConfigError):
    """The scenario asked for does not exist; the message lists those that do."""

    when = "a --sim-scenario that does not exist"


def get_scenario(key: str) -> Scenario:
    try:
        return SCENARIOS[key.strip().lower()]
    except KeyError:
        known = ", ".join(sorted(SCENARIOS))
        raise UnknownScenario(f"unknown scenario {key!r}: use one of {known}") from None


class PhaseFollower:
    """The simulated GPU's activity follows a real training process: busy for the share of
    each step the agent reports in compute phases (h2d, forward, backward, optimizer), idle
    while the process waits for data, a collective or side work. So a real host-side
    bottleneck shows on the simulated board as it would on a real GPU."""

    COMPUTE = COMPUTE_PHASES

    def __init__(self) -> None:
        self.share = 0.0
        """Share of recent step time spent in compute phases (0 before any step)."""

    def update(self, shares: dict[str, float]) -> None:
        self.share = min(1.0, max(0.0, sum(shares.get(p, 0.0) for p in self.COMPUTE)))

    def activity(self, t: float, index: int) -> Activity:
        s = self.share
        return Activity(duty=s, sm=0.93 * s, occupancy=0.55 * s, tensor=0.7 * s, dram=0.45 * s,
                        pcie_rx=0.02 * s)  # fmt: skip

    def scenario(self) -> Scenario:
        return Scenario(
            "follow",
            "the GPU is busy exactly while the real process computes",
            self.activity,
            mem_used_frac=0.6,
        )
