"""A run of step times' mean with an error that holds for correlated steps, and the change
between two such runs with its interval: what "did it help?" is answered with.

Neighbouring steps are not independent (a save every 50 steps, a slow minute on a shared
node, an epoch's first batches), so the spread of single steps understates the error of their
mean. Batch means do not: the run cut into batches of consecutive steps, the error from how
the batches' means spread, at every size of batch from BATCH_STEPS doubling while GROUPS_MIN
batches remain, the largest kept (a correlation longer than one size shows at the next), as
the budget's shares are (``step_sums``). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gputop.diagnose.step_sums import BATCH_STEPS, GROUPS_MIN

Z = 2.0
"""Standard errors either side of a change: about 95% of identical runs fall inside, so a job
that did not change is said to have changed about once in twenty."""
STEPS_LEAST = GROUPS_MIN * BATCH_STEPS
"""Steps each side needs before a change is said at all: the fewest whose batches give an
error."""


@dataclass(frozen=True, slots=True)
class Mean:
    """A run's mean with one standard error."""

    value: float
    error: float
    steps: int


@dataclass(frozen=True, slots=True)
class Change:
    """``after`` against ``before``: the relative change of the mean and its half-width."""

    before: Mean
    after: Mean
    rel: float
    """after / before - 1 (-0.18: 18% shorter)."""
    margin: float
    """Z standard errors of ``rel`` (0.02: "±2%")."""

    @property
    def settled(self) -> bool:
        """Both sides long enough to say anything (STEPS_LEAST)."""
        return min(self.before.steps, self.after.steps) >= STEPS_LEAST

    @property
    def distinguishable(self) -> bool:
        """The interval leaves 0 out: a change, not noise."""
        return self.settled and abs(self.rel) > self.margin

    @property
    def low(self) -> float:
        return self.rel - self.margin

    @property
    def high(self) -> float:
        return self.rel + self.margin


def _error_at(values: Sequence[float], size: int) -> float | None:
    """The mean's standard error from batches of ``size`` consecutive values (the last
    partial batch left out); None under GROUPS_MIN batches."""
    k = len(values) // size
    if k < GROUPS_MIN:
        return None
    means = [math.fsum(values[i * size : (i + 1) * size]) / size for i in range(k)]
    centre = math.fsum(means) / k
    var = math.fsum((m - centre) ** 2 for m in means) / (k - 1)
    return math.sqrt(var / k)


def mean_of(values: Sequence[float]) -> Mean:
    """The mean and its batch-means error (the largest of single steps and of every size of
    batch with GROUPS_MIN of them: single steps count while too few batches exist)."""
    n = len(values)
    if n == 0:
        return Mean(0.0, 0.0, 0)
    value = math.fsum(values) / n
    errors = []
    size = 1
    while (e := _error_at(values, size)) is not None:
        errors.append(e)
        size = BATCH_STEPS if size == 1 else size * 2
    return Mean(value, max(errors, default=0.0), n)


def mean_of_batches(means: Sequence[float], size: int, steps: int) -> Mean:
    """A run kept as the means of its batches of ``size`` consecutive steps (a long run held in
    bounded memory, ``run_steps``): the mean and the largest error of every size of batch
    from ``size`` up with GROUPS_MIN of them; ``steps`` is how many steps they hold."""
    if not means:
        return Mean(0.0, 0.0, steps)
    value = math.fsum(means) / len(means)
    errors = []
    merge = 1
    while (e := _error_at(means, merge)) is not None:
        errors.append(e)
        merge *= 2
    return Mean(value, max(errors, default=0.0), steps)


def change_between(before: Mean, after: Mean) -> Change:
    """``after`` against ``before`` (runs' means, ``mean_of``: a run remembered, a recording,
    the steps since a shift); the margin from both errors (the delta method on a ratio of
    independent means)."""
    if not before.value > 0:
        return Change(before, after, 0.0, math.inf)
    ratio = after.value / before.value
    se = math.hypot(after.error, ratio * before.error) / before.value
    return Change(before, after, ratio - 1.0, Z * se)


def change_text(c: Change) -> str:
    """ "-18% ±2%", or "-1.5% ±3%, not yet distinguishable" while the interval holds 0 (a
    decimal below 10%, where a lever of a few percent is told from none)."""
    if not c.settled:
        return f"{_pct(c.rel)} (too few steps yet)"
    text = f"{_pct(c.rel)} ±{_pct(c.margin, sign=False)}"
    return text if c.distinguishable else f"{text}, not yet distinguishable"


def _pct(x: float, sign: bool = True) -> str:
    if not math.isfinite(x):
        return "?"
    digits = 1 if abs(x) < 0.1 else 0
    text = f"{100 * x:.{digits}f}%"
    return ("+" + text if x > 0 else text) if sign else text.lstrip("-")
