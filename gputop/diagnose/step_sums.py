"""An agent's long window of steps summed into budget slices, kept as the window slides.

The verdict runs after every reading of any source; an agent's steps change once a second,
by a few steps at the new end and as many off the old one, while the window holds up to 512
(``RankSteps.long``). Each step is turned into its part once (its phases' time per slice,
its unmarked time, its side work) and the sums follow the window: a new reading adds the new
steps' parts and takes off the dropped ones, so a reading costs what changed, not what is
held. Anything that is not such a slide (a restart, a window that jumped) sums the window
afresh. Pure in effect: the same steps give the same sums, whatever was kept.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import mul

from gputop.diagnose.signals.rank_steps import RankSteps
from gputop.model.steps import StepRecord
from gputop.vocab import budget as b
from gputop.vocab import steps as step

PHASE_SLICE: dict[str, str] = {
    step.DATA_WAIT: b.DATA,
    step.H2D: b.H2D,
    step.FORWARD: b.COMPUTE,
    step.BACKWARD: b.COMPUTE,
    step.OPTIMIZER: b.COMPUTE,
    step.GRAD_SYNC: b.COMMS,
    step.CHECKPOINT: b.CHECKPOINT,
    step.EVAL: b.EVAL,
    step.EVAL_LOG: b.EVAL,
    step.LOG: b.LOG,
    step.OTHER: b.LOOP,
}
"""The agent's phases -> slices; a custom phase goes by the words of its name (CUSTOM_WORDS)."""
CUSTOM_WORDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("eval", "valid", "val", "test"), b.EVAL),
    (("ckpt", "checkpoint", "save"), b.CHECKPOINT),
    (("log", "metric", "wandb", "tensorboard"), b.LOG),
    (("data", "load", "batch", "fetch"), b.DATA),
    (("h2d", "copy", "transfer"), b.H2D),
    (("sync", "allreduce", "all_reduce", "comm"), b.COMMS),
    (("forward", "backward", "optim", "fwd", "bwd", "loss"), b.COMPUTE),
)
"""A user's own phase names, by the words in them (a word that starts with one: "validation",
"checkpointing"; "val" only whole); anything else is the loop's own time."""
SIDE_STEP = {step.CHECKPOINT: b.CHECKPOINT, step.EVAL: b.EVAL, step.EVAL_LOG: b.EVAL,
             step.LOG: b.LOG}  # fmt: skip
"""Side phases whose step's extra unmarked time is theirs: a checkpoint's rename or cleanup
around the save, an eval pass's metrics between its forwards."""
SLICE_AT = {name: i for i, name in enumerate(b.SLICES)}
BATCH_STEPS = 16
"""Consecutive steps per batch of the batch-means error, by step number (the same steps make
the same batches, whatever the window held before): neighbouring steps are correlated (a
save every 50 steps, an epoch's first batches, a co-tenant for a minute), batches of them
less so."""
GROUPS_MIN = 4
"""Batches a size of batch needs for its spread to count: batches of 16 steps, then of 32,
64, ... while the window holds this many; the largest spread of any size is the error (a
correlation longer than one size shows at the next). Measured on 256-step windows of a data
wait that switches every 32 steps: 0.60 of its true error from batches of 16 alone, 0.83
from the largest; every 8 steps 1.08; steps drawn alone 1.26 (tests/unit/diagnose/
test_step_sums.py). Only whole runs of GROUPS_MIN batches inside the window are read, so the
spread is remade once the window crosses into another run (every 64 steps at either end), not
at each reading: 166 us a reading of a 512-step window, 107 us without the spread."""
STEPS_ALONE = 4 * BATCH_STEPS
"""A window this short (early in a run) has each step as a batch too."""
KEPT_AGENTS = 64
"""Agents whose sums are kept (a job's ranks on one node, with room); past it, all are
dropped and summed afresh."""


@functools.lru_cache(maxsize=1024)
def phase_slice(name: str) -> str:
    """The slice an agent phase's time belongs to (names are few and repeat every step; the
    agent's wire bounds their length)."""
    known = PHASE_SLICE.get(name)
    if known is not None:
        return known
    words = re.findall(r"[a-z]+", name.lower())
    for stems, where in CUSTOM_WORDS:
        if any(w == s or (s != "val" and w.startswith(s)) for w in words for s in stems):
            return where
    return b.LOOP


@dataclass(frozen=True, slots=True)
class Sums:
    """An agent's long window summed: what its budget is made from."""

    steps: int
    ns: Mapping[str, float]
    """ns per slice (unmarked time in the loop; GC not taken out yet)."""
    gc: float
    median_s: float
    spread: Mapping[str, float]
    """One standard error of each slice's share (GC taken out), from how the shares of the
    window's batches of consecutive steps spread (``spread_of``); 0 for a slice no step
    had."""


@dataclass(frozen=True, slots=True)
class _Part:
    """One step as the sums count it."""

    of: StepRecord
    """The step it was made from (``_same``: what a later reading's step is checked against)."""
    own: int
    """Unmarked ns (the step less its phases)."""
    ns: tuple[int, ...]
    """Its phases' ns per slice, in SLICES order."""
    side: int
    """SLICE_AT of the slice its largest side phase (SIDE_STEP) is, -1 with none."""


def _part(s: StepRecord) -> _Part:
    phases = s.phases
    ns = [0] * len(b.SLICES)
    for name, t in phases.items():
        ns[SLICE_AT[phase_slice(name)]] += t
    work = [(phases[n], n) for n in SIDE_STEP if phases.get(n)]
    side = SLICE_AT[SIDE_STEP[max(work)[1]]] if work else -1
    own = max(0, s.dur_ns - sum(phases.values()))
    return _Part(s, own, tuple(ns), side)


def step_slices(s: StepRecord) -> tuple[float, ...]:
    """One step's ns per slice in SLICES order: its phases by slice, its unmarked time the
    loop's, its GC taken out (``take_gc``): what a step-time shift compares slice by slice."""
    p = _part(s)
    acc = _summed(p.ns, p.own, (), 0, p.of.gc_ns or 0)
    return tuple(acc[n] for n in b.SLICES)


def _same(p: _Part, s: StepRecord) -> bool:
    """The step a part was made from, or one equal in all the part reads (the link replaces a
    step with a new object when its GPU times resolve)."""
    was = p.of
    return was is s or (
        was.step == s.step
        and was.t0_ns == s.t0_ns
        and was.dur_ns == s.dur_ns
        and was.gc_ns == s.gc_ns
        and was.phases == s.phases
    )


class _Batch:
    """Running sums of one batch of consecutive parts, and its row for the spread (cached
    until the batch or the coarse typical unmarked time it was made with changes)."""

    __slots__ = ("gc", "n", "ns", "own", "row", "sides")

    def __init__(self, slices: int) -> None:
        self.ns = [0] * slices
        self.gc = 0
        self.own = 0
        self.n = 0
        self.sides: list[_Part] = []
        self.row: tuple[int, list[float]] | None = None

    def add(self, p: _Part, sign: int) -> None:
        self.ns = [x + sign * y for x, y in zip(self.ns, p.ns, strict=True)]
        self.gc += sign * (p.of.gc_ns or 0)
        self.own += sign * p.own
        self.n += sign
        self.row = None
        if p.side >= 0:
            if sign > 0:
                self.sides.append(p)
            else:
                self.sides.remove(p)

    def row_at(self, typical: int) -> list[float]:
        """ns per slice in SLICES order, GC taken out, side work's extra unmarked time beyond
        ``typical`` with its side phase."""
        if self.row is None or (self.sides and self.row[0] != typical):
            acc = _summed(self.ns, self.own, self.sides, typical, self.gc)
            self.row = (typical, [acc[n] for n in b.SLICES])
        return self.row[1]


def _coarse(ns: int) -> int:
    """``ns`` to its six leading bits (within 1/32): the typical unmarked time the spread's
    rows are made with, so that a median moving by a few ns does not remake them all."""
    drop = max(0, ns.bit_length() - 6)
    return ns >> drop << drop


def _summed(
    ns: Sequence[int], own: int, sides: Sequence[_Part], typical: int, gc: float | None = None
) -> dict[str, float]:
    """Phases' ns per slice and unmarked ns to the loop, except a side step's unmarked time
    beyond the typical step's, which goes with its largest side phase; with ``gc``, that
    taken out (``take_gc``)."""
    acc = dict(zip(b.SLICES, map(float, ns), strict=True))
    loop = own
    for p in sides:
        if p.own > typical:
            acc[b.SLICES[p.side]] += p.own - typical
            loop -= p.own - typical
    acc[b.LOOP] += loop
    if gc is not None:
        take_gc(acc, gc)
    return acc


def _merged(rows: Mapping[int, list[float]]) -> dict[int, list[float]]:
    """Batches two by two (keys halved): the next size of batch."""
    out: dict[int, list[float]] = {}
    for k, row in rows.items():
        into = out.get(k // 2)
        out[k // 2] = row if into is None else [x + y for x, y in zip(into, row, strict=True)]
    return out


def take_gc(acc: dict[str, float], gc: float) -> None:
    """GC's ns out of the slices it ran in: the loop's first (a collection runs where Python
    allocates), the rest from every other slice by its size."""
    gc = min(gc, sum(acc.values()))
    first = min(gc, acc[b.LOOP])
    acc[b.LOOP] -= first
    rest = gc - first
    others = sum(v for k, v in acc.items() if k != b.GC)
    if rest > 0 and others > 0:
        for k in acc:
            if k != b.GC:
                acc[k] -= rest * acc[k] / others
    acc[b.GC] += gc


def spread_of(rows: Sequence[Sequence[float]]) -> dict[str, float]:
    """One standard error of each slice's share of the batches' time together (rows of ns
    per slice in SLICES order): a ratio of sums, its variance from the batches' residuals
    (sum x / sum t, each batch off by x - R t), the batch-means error that holds for
    correlated steps (a save every 50 steps, an epoch's first batches); 0 under two."""
    n = len(rows)
    walls = [sum(x) for x in rows]
    total = sum(walls)
    out = dict.fromkeys(b.SLICES, 0.0)
    if n < 2 or not total > 0:
        return out
    scale = n / total / (n * (n - 1)) ** 0.5
    tt = sum(map(mul, walls, walls))
    for i, name in enumerate(b.SLICES):
        col = [x[i] for x in rows]
        part = sum(col)
        if part:  # sum (x - R t)^2, expanded: one pass of products per column
            ratio = part / total
            sq = sum(map(mul, col, col)) - 2 * ratio * sum(map(mul, col, walls)) + ratio**2 * tt
            out[name] = max(0.0, sq) ** 0.5 * scale
    return out


def batch_spread(rows: Mapping[int, list[float]]) -> dict[str, float]:
    """The largest spread of any size of batch (GROUPS_MIN): batches of BATCH_STEPS steps,
    then two by two, while GROUPS_MIN remain."""
    spreads = []
    while len(rows) >= GROUPS_MIN:
        spreads.append(spread_of(list(rows.values())))
        rows = _merged(rows)
    return {n: max((x[n] for x in spreads), default=0.0) for n in b.SLICES}


class _Sliding:
    """One agent's window as parts, with their running totals and sorted unmarked and step
    times (the medians); ``slide`` moves it to a new window."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.parts: deque[_Part] = deque()
        self.ns = [0] * len(b.SLICES)
        self.gc = 0
        self.owns: list[int] = []
        self.durs: list[int] = []
        self.batches: dict[int, _Batch] = {}
        """By step number // BATCH_STEPS: the same steps make the same batches, whatever the
        window held before."""
        self.spread: tuple[tuple[int, int, int], dict[str, float]] | None = None
        """The batches' spread and what it was made from (the bounds of the runs of batches
        it read, the coarse typical unmarked time): those batches change only with them."""

    def _add(self, p: _Part) -> None:
        at = p.of.step
        self.parts.append(p)
        self.ns = [x + y for x, y in zip(self.ns, p.ns, strict=True)]
        self.gc += p.of.gc_ns or 0
        bisect.insort(self.owns, p.own)
        bisect.insort(self.durs, p.of.dur_ns)
        batch = self.batches.get(at // BATCH_STEPS)
        if batch is None:
            batch = self.batches[at // BATCH_STEPS] = _Batch(len(b.SLICES))
        batch.add(p, 1)

    def _drop_oldest(self) -> None:
        p = self.parts.popleft()
        self.ns = [x - y for x, y in zip(self.ns, p.ns, strict=True)]
        self.gc -= p.of.gc_ns or 0
        del self.owns[bisect.bisect_left(self.owns, p.own)]
        del self.durs[bisect.bisect_left(self.durs, p.of.dur_ns)]
        key = p.of.step // BATCH_STEPS
        batch = self.batches[key]
        batch.add(p, -1)
        if not batch.n:
            del self.batches[key]

    def slide(self, steps: Sequence[StepRecord]) -> None:
        """To the window ``steps``: off the old end what left it, on the new end what came;
        afresh when the new window is not the old one moved on."""
        start = next((i for i, p in enumerate(self.parts) if _same(p, steps[0])), None)
        if start is None:
            self._reset()  # the window moved past all it held, or to another run
        for _ in range(start or 0):
            self._drop_oldest()
        held = len(self.parts)
        if held > len(steps) or not all(map(_same, self.parts, steps[:held])):
            self._reset()  # not a slide: start again
            held = 0
        for s in steps[held:]:
            self._add(_part(s))

    def sums(self) -> Sums:
        """Each phase to its slice; unmarked time to the loop, except in a step with side
        work (SIDE_STEP), whose unmarked time beyond the typical step's goes with its largest
        side phase (what a step that is long because of a save spends around the save)."""
        typical = self.owns[len(self.owns) // 2]
        sides = [p for batch in self.batches.values() for p in batch.sides]
        acc = _summed(self.ns, sum(self.owns), sides, typical)
        coarse = _coarse(typical)
        # the batches from the first whole run of GROUPS_MIN after the window's first batch
        # to the last whole run before its last: remade when the window crosses such a run
        lo = (next(iter(self.batches)) // GROUPS_MIN + 1) * GROUPS_MIN
        hi = next(reversed(self.batches)) // GROUPS_MIN * GROUPS_MIN
        if self.spread is None or self.spread[0] != (lo, hi, coarse):
            inside = {k: x.row_at(coarse) for k, x in self.batches.items() if lo <= k < hi}
            self.spread = ((lo, hi, coarse), batch_spread(inside))
        spread = self.spread[1]
        if len(self.parts) <= STEPS_ALONE:  # early: each step a batch too
            alone = [
                _summed(p.ns, p.own, [p] if p.side >= 0 else [], coarse, p.of.gc_ns or 0)
                for p in self.parts
            ]
            each = spread_of([[x[n] for n in b.SLICES] for x in alone])
            spread = {n: max(spread[n], each[n]) for n in b.SLICES}
        median = self.durs[len(self.durs) // 2] / 1e9
        return Sums(len(self.parts), acc, float(self.gc), median, spread)


_KEPT: dict[int, tuple[tuple[StepRecord, ...], _Sliding, Sums | None]] = {}
"""Per agent: the steps tuple of its last reading (an identity check: each reading's steps
are a new tuple, and the verdict runs after every reading of any source), its sliding window
and the sums it gave."""


def sums_over(steps: Sequence[StepRecord]) -> Sums | None:
    """Any run of steps summed as a window is (an interval's, ``budget_bins``); None for none."""
    if not steps:
        return None
    window = _Sliding()
    window.slide(steps)
    return window.sums()


def sums_of(r: RankSteps, least: int) -> Sums | None:
    """The agent's long window (``RankSteps.long``) summed; None under ``least`` steps."""
    a, steps = r.agent, r.long
    hit = _KEPT.get(a.pid)
    if hit is not None and hit[0] is a.steps:
        return hit[2]
    if hit is None and len(_KEPT) >= KEPT_AGENTS:
        _KEPT.clear()
    sliding = hit[1] if hit is not None and len(steps) >= least else _Sliding()
    sums = None
    if len(steps) >= least:
        sliding.slide(steps)
        sums = sliding.sums()
    _KEPT[a.pid] = (a.steps, sliding, sums)
    return sums
