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

    def _add(self, p: _Part) -> None:
        self.parts.append(p)
        self.ns = [x + y for x, y in zip(self.ns, p.ns, strict=True)]
        self.gc += p.of.gc_ns or 0
        bisect.insort(self.owns, p.own)
        bisect.insort(self.durs, p.of.dur_ns)

    def _drop_oldest(self) -> None:
        p = self.parts.popleft()
        self.ns = [x - y for x, y in zip(self.ns, p.ns, strict=True)]
        self.gc -= p.of.gc_ns or 0
        del self.owns[bisect.bisect_left(self.owns, p.own)]
        del self.durs[bisect.bisect_left(self.durs, p.of.dur_ns)]

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
        acc = dict(zip(b.SLICES, map(float, self.ns), strict=True))
        loop = sum(self.owns)
        for p in self.parts:
            if p.side >= 0 and p.own > typical:
                acc[b.SLICES[p.side]] += p.own - typical
                loop -= p.own - typical
        acc[b.LOOP] += loop
        return Sums(len(self.parts), acc, float(self.gc), self.durs[len(self.durs) // 2] / 1e9)


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
