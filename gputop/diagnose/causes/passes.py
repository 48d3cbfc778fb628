"""How often a slice's side work comes and how long each time, from the typical rank's own
steps (the agent's phases): an eval pass every 25 steps of 1.2 s, a save every 4 steps of
0.3 s, logging every step. What a lever on the interval would save follows from these
numbers. Shared by the side-work causes. Pure."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.step_sums import phase_slice
from gputop.model.budget import Budget
from gputop.model.steps import StepRecord

EVERY_STEP = 0.9
"""Share of the steps holding a pass from which the work comes every step (no interval to
lengthen)."""
NOTICED_NS = 100_000
"""A step whose slice took less than this (0.1 ms) holds no pass of it (a marker's cost)."""


@dataclass(frozen=True)
class Passes:
    """A slice's work in the typical rank's recent steps."""

    count: int
    """Steps in which it took time."""
    steps: int
    """Steps looked at."""
    each_ms: float
    """The median time it took in those steps."""
    spread_ms: tuple[float, float]
    """The lower and upper quartile of those times: the range a saving from them rests on."""
    every: float
    """Steps from one pass to the next, on average: from the first pass to the last where
    there are two (the window's edges cut an interval), else the steps over the one."""

    @property
    def every_step(self) -> bool:
        return self.count >= self.steps * EVERY_STEP

    def said(self, what: str) -> str:
        """ "an evaluation pass every ~25 steps takes 1.2 s (4 in the last 100 steps)"."""
        each = f"{self.each_ms / 1000:.1f} s" if self.each_ms >= 1000 else f"{self.each_ms:.0f} ms"
        if self.every_step:
            return f"{what} every step takes {each}"
        return (
            f"{what} every ~{self.every:.0f} steps takes {each} ({self.count} in the last "
            f"{self.steps} steps)"
        )


def _in(s: StepRecord, slice_name: str) -> float:
    return sum(ns for name, ns in s.phases.items() if phase_slice(name) == slice_name)


def passes(sig: RuleInputs, budget: Budget | None, slice_name: str) -> Passes | None:
    """The slice's passes in the typical rank's long window (the spikes' window: periodic work
    needs several periods), None without its agent's steps or any pass."""
    if budget is None or sig.steps is None:
        return None
    rank = sig.steps.of(budget.typical.pid)
    steps = rank.long if rank is not None else ()
    took = [(i, ns) for i, s in enumerate(steps) if (ns := _in(s, slice_name)) >= NOTICED_NS]
    if not took:
        return None
    n = len(took)
    every = (took[-1][0] - took[0][0]) / (n - 1) if n > 1 else float(len(steps))
    ms = sorted(ns / 1e6 for _, ns in took)
    return Passes(n, len(steps), statistics.median(ms), (ms[n // 4], ms[(3 * n) // 4]), every)
