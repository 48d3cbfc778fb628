"""Where a rank's step time shifts inside a run, found online from the agent's steps.

A knob changed live, a slower shard, a co-tenant arriving: the loop's step time moves to a new
level and stays there. Each rank's steps since its last shift are its segment. Every new step
compares the latest WINDOW steps with the segment before them by rank (the Mann-Whitney
statistic: each recent step's place among the segment's), which a few odd steps in the segment
(a GC pause, a slow batch) hardly move; the time a step spent in side work (an evaluation, a
checkpoint: PERIODIC) is left out of what is compared, so a save every 50 steps
is not a shift, while the slices say afterwards whether side work moved. A shift is called when
the window sits Z_SHIFT standard errors above or below the segment (as if its steps were
independent), its median moved by SHIFT_MIN or more, and it lies beyond every median the
segment's own windows of as many steps had (``envelope``): steps are correlated (a slow drift
of the clock, a burst of slow batches), and what the job's own past did at this window length
is no shift; it is placed at the split of the last 2 x WINDOW steps that fits two levels best
(least absolute deviation), and its new level becomes the next segment.

Pure in effect: the same steps give the same shifts, whatever order the readings came in (each
step is taken once, by its number, ``new_steps``).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop.diagnose.batch_means import Mean, mean_of
from gputop.diagnose.step_sums import step_slices
from gputop.model.steps import StepCursor, StepRecord, new_steps
from gputop.vocab import budget as b
from gputop.vocab import steps as step

PERIODIC = (step.EVAL, step.EVAL_LOG, step.CHECKPOINT)
"""Phases left out of the time a shift is looked for in: work a job does every N steps, whose
steps would read as shifts of their own; their slices are left out of what moved too."""
PERIODIC_SLICES = (b.EVAL, b.CHECKPOINT)

WINDOW = 12
"""Recent steps compared with the segment: a shift is called once this many steps are past
it (within 20 steps of it, with the reading's few steps of delay)."""
SEGMENT_LEAST = 64
"""Steps a segment needs before the next window is compared with it: its median and how far
its own windows wander known (some 50 windows of WINDOW steps)."""
SEGMENT_MOST = 256
"""Steps of a segment compared with (its latest): a level that drifts slowly is compared with
its recent past, and the cost of a step stays bounded."""
Z_SHIFT = 4.5
"""Standard errors between the window and the segment for a shift: one false call in about
300,000 windows of a stable job's independent steps (one-sided 3.4e-6, either side)."""
SHIFT_MIN = 0.05
"""Smallest change of the median step called a shift: smaller ones are left to the run's
before/after comparison, whose interval resolves them over hundreds of steps."""
TEST_EVERY = 2
"""Steps between two comparisons of the window with the segment: a shift is still called
within WINDOW + 1 steps of it, at half the cost (8 ranks' steps are compared on one core)."""
ENVELOPE_EVERY = 64
"""Steps between two readings of the segment's own windows' medians (``envelope``)."""
BEYOND = 0.025
"""How far past the segment's own windows' medians the window's must be, at least (of the
segment's median); else half their range again."""
SHIFTS_KEPT = 64
"""Shifts kept per rank (a job that flaps keeps its latest)."""
RANKS_MOST = 256
"""Ranks watched; past it, those gone are forgotten."""


@dataclass(frozen=True, slots=True)
class Shift:
    """One rank's step time moved to a new level at ``step``."""

    pid: int
    step: int
    """The first step at the new level."""
    t0_ns: int
    """That step's start (the agent's clock)."""
    before_s: float
    """The median step (seconds, side work left out) of the segment before."""
    after_s: float
    """The median of the steps after, when it was called."""
    before: Mean
    """The mean step before it (seconds, side work left out) with its batch-means error: what
    the steps since are compared with in place (``ShiftWatch.since``)."""
    moved: Mapping[str, float]
    """Per slice, seconds per step after less before (the mean over each side's steps): which
    slice moved."""

    @property
    def rel(self) -> float:
        return self.after_s / self.before_s - 1.0 if self.before_s > 0 else 0.0

    def slices_moved(self, least: float = 0.2) -> list[tuple[str, float]]:
        """The slices that moved by ``least`` of the step's change or more, largest first."""
        total = abs(self.after_s - self.before_s)
        ranked = sorted(self.moved.items(), key=lambda kv: -abs(kv[1]))
        return [(k, v) for k, v in ranked if total > 0 and abs(v) >= least * total]


def loop_ns(s: StepRecord) -> int:
    """A step's time less its periodic side work: what a shift is looked for in."""
    side = sum(t for name, t in s.phases.items() if name in PERIODIC)
    return max(1, s.dur_ns - side)


def _median(sorted_values: Sequence[int]) -> float:
    n = len(sorted_values)
    if n == 0:
        return 0.0
    mid = n // 2
    return float(sorted_values[mid]) if n % 2 else (sorted_values[mid - 1] + sorted_values[mid]) / 2


def _split(values: Sequence[int], before: float, after: float) -> int:
    """The index in ``values`` where the second level starts: least absolute deviation from
    ``before`` up to it and from ``after`` from it on."""
    cost = sum(abs(v - after) for v in values)
    best, at = cost, 0
    for i, v in enumerate(values):
        cost += abs(v - before) - abs(v - after)
        if cost < best:
            best, at = cost, i + 1
    return at


def _moved(before: Sequence[StepRecord], after: Sequence[StepRecord]) -> dict[str, float]:
    """Per slice but the periodic ones, the mean seconds per step after less before: what the
    shift compared, taken apart."""
    if not before or not after:
        return {}
    sums_b = [0.0] * len(b.SLICES)
    sums_a = [0.0] * len(b.SLICES)
    for s in before:
        sums_b = [x + y for x, y in zip(sums_b, step_slices(s), strict=True)]
    for s in after:
        sums_a = [x + y for x, y in zip(sums_a, step_slices(s), strict=True)]
    return {
        n: (sums_a[i] / len(after) - sums_b[i] / len(before)) / 1e9
        for i, n in enumerate(b.SLICES)
        if (sums_a[i] or sums_b[i]) and n not in PERIODIC_SLICES
    }


def envelope(times: Sequence[int], m: int = WINDOW) -> tuple[float, float]:
    """The least and most median of ``m`` consecutive values in ``times``: how far the job's
    own windows wandered (a slow drift, correlated steps, a burst of slow batches) without
    any shift; (0, inf) under ``m`` values."""
    if len(times) < m:
        return 0.0, math.inf
    window = sorted(times[:m])
    low = high = _median(window)
    for old, new in zip(times, times[m:], strict=False):
        del window[bisect.bisect_left(window, old)]
        bisect.insort(window, new)
        mid = _median(window)
        low, high = min(low, mid), max(high, mid)
    return low, high


class _Rank:
    """One rank's segment: its steps in order with their loop times and, for the part before
    the window, those times sorted (the ranks each new window step is placed by)."""

    def __init__(self) -> None:
        self.cursor: StepCursor | None = None
        self.shifts: deque[Shift] = deque(maxlen=SHIFTS_KEPT)
        self._begin([])

    def _begin(self, steps: Sequence[StepRecord]) -> None:
        """A new segment of ``steps`` (the first of a run, or a new level's)."""
        self.steps: deque[StepRecord] = deque(steps)
        self.times: deque[int] = deque(map(loop_ns, steps))
        held = max(0, len(steps) - WINDOW)
        self.sorted: list[int] = sorted(list(self.times)[:held])
        """Loop times of the segment's steps before the window (at most SEGMENT_MOST)."""
        self.taken = 0
        """Steps into the segment, for when ``bounds`` is remade."""
        self.pending = False
        """The last comparison found the window apart: the next one that does calls it."""
        self.bounds = (0.0, math.inf)
        """``envelope`` of the segment's steps before the window, remade every
        ENVELOPE_EVERY steps."""

    def take(self, pid: int, s: StepRecord) -> Shift | None:
        """The step after the last; the shift it calls, if any."""
        if self.steps and s.step <= self.steps[-1].step:
            self._begin([])  # the agent numbers from 0 again: a new run, a new segment
        self.steps.append(s)
        self.times.append(loop_ns(s))
        self.taken += 1
        if len(self.times) > WINDOW:  # the step leaving the window joins the segment
            bisect.insort(self.sorted, self.times[-WINDOW - 1])
            if len(self.sorted) > SEGMENT_MOST:
                self.steps.popleft()
                del self.sorted[bisect.bisect_left(self.sorted, self.times.popleft())]
        if len(self.sorted) < SEGMENT_LEAST:
            return None
        if len(self.sorted) == SEGMENT_LEAST or self.taken % ENVELOPE_EVERY == 0:
            self.bounds = envelope(list(self.times)[: len(self.sorted)])
        return self._test(pid) if self.taken % TEST_EVERY == 0 else None

    def _test(self, pid: int) -> Shift | None:
        ref = self.sorted
        n = len(ref)
        times = self.times
        window = [times[i] for i in range(len(times) - WINDOW, len(times))]
        # each window step's place among the segment's (ties half), on average
        place = sum(bisect.bisect_left(ref, v) + bisect.bisect_right(ref, v) for v in window)
        mean = place / (2 * n * WINDOW)
        sd = math.sqrt((n + WINDOW + 1) / (12 * n * WINDOW))
        if abs(mean - 0.5) < Z_SHIFT * sd:
            self.pending = False
            return None
        before, after = _median(ref), _median(sorted(window))
        if not before > 0 or abs(after / before - 1) < SHIFT_MIN:
            self.pending = False
            return None
        # beyond where the segment's own windows wandered, by half their range again (more
        # while the segment is short: few windows have seen less of how far it wanders)
        low, high = self.bounds
        margin = max(BEYOND * before, (high - low) / 2 * math.sqrt(SEGMENT_MOST / n))
        if low - margin < after < high + margin:
            self.pending = False
            return None
        if not self.pending:  # and again at the next comparison: a level, not an excursion
            self.pending = True
            return None
        self.pending = False
        tail = list(times)[-2 * WINDOW :]
        at = len(times) - len(tail) + _split(tail, before, after)
        steps = list(self.steps)
        old, new = steps[:at], steps[at:]
        shift = Shift(
            pid=pid,
            step=new[0].step,
            t0_ns=new[0].t0_ns,
            before_s=before / 1e9,
            after_s=after / 1e9,
            before=mean_of([loop_ns(x) / 1e9 for x in old]),
            moved=_moved(old, new),
        )
        self.shifts.append(shift)
        self._begin(new)  # the new level is the segment now
        return shift


class ShiftWatch:
    """Every rank's segments; ``add`` each agents' reading in the order they came."""

    def __init__(self) -> None:
        self._ranks: dict[int, _Rank] = {}

    def add(self, agents: Sequence[tuple[int, tuple[StepRecord, ...]]]) -> list[Shift]:
        """Each agent's (pid, steps) of one reading; the shifts called by its new steps."""
        if len(self._ranks) > RANKS_MOST:
            present = {pid for pid, _ in agents}
            self._ranks = {p: r for p, r in self._ranks.items() if p in present}
        called: list[Shift] = []
        for pid, steps in agents:
            r = self._ranks.get(pid)
            if r is None:
                r = self._ranks[pid] = _Rank()
            fresh, r.cursor = new_steps(steps, r.cursor)
            for s in fresh:
                shift = r.take(pid, s)
                if shift is not None:
                    called.append(shift)
        return called

    def shifts(self, pid: int) -> tuple[Shift, ...]:
        r = self._ranks.get(pid)
        return tuple(r.shifts) if r is not None else ()

    def since(self, pid: int) -> Mean:
        """The rank's mean step (side work left out) since its last shift, with its error."""
        r = self._ranks.get(pid)
        return mean_of([t / 1e9 for t in r.times]) if r is not None else mean_of([])

    def segment(self, pid: int) -> tuple[StepRecord, ...]:
        """The rank's steps since its last shift (at most SEGMENT_MOST + WINDOW)."""
        r = self._ranks.get(pid)
        return tuple(r.steps) if r is not None else ()
