"""What the principal's first lever would save, from the budget: the share of the step the
slice it shrinks holds, times how much of it that lever removes. Pure."""

from __future__ import annotations

from gputop.diagnose.bounds import SLICE_BOUNDS
from gputop.diagnose.findings import Finding, Saving, speedup_of
from gputop.diagnose.signals import RuleInputs
from gputop.vocab import budget as slices

REMOVES: dict[str, tuple[float, str]] = {
    slices.STRAGGLER: (1.0, "if {slow} matched the others"),
    slices.DATA: (1.0, "if every batch were ready when asked"),
    slices.EVAL: (0.5, "if it evaluated half as often"),
    slices.CHECKPOINT: (0.5, "if it saved half as often"),
    slices.LOG: (0.5, "if it logged half as often"),
    slices.GC: (0.75, "if the collector ran far less often"),
}
"""Per slice, the share of it the first lever removes and what that assumes: the straggler's
wait goes when the slow rank matches the others; an interval doubled halves its side work;
higher GC thresholds took 74-100% of the collector's time (tests/bench/bench_gc_levers.py)."""


def _first_slice(f: Finding, slice_name: str | None, sig: RuleInputs) -> str | None:
    """The slice the first lever shrinks: the principal's, or for side work the largest side
    slice (its levers come first: ``levers.side_work``). None when a cause that stretches the
    slice leads (memory pressure, oversubscribed CPUs: their first lever frees memory or CPUs,
    which the budget cannot size) and no cause of ours leads the levers."""
    budget = sig.budget
    if budget is None or slice_name is None:
        return None
    if f.bound not in SLICE_BOUNDS.get(slice_name, ()) and f.cause is None:
        return None
    if slice_name in slices.SIDE:
        return max(slices.SIDE, key=budget.share)
    return slice_name


def saving_of(f: Finding, slice_name: str | None, sig: RuleInputs) -> Saving | None:
    """The first lever's saving, or None where the budget cannot size it (comms: the bytes
    per step are not measured yet; the loop's own Python: what moves off the step is not
    known)."""
    name = _first_slice(f, slice_name, sig)
    if name is None or name not in REMOVES or sig.budget is None:
        return None
    part, condition = REMOVES[name]
    share = sig.budget.share(name) * part
    if share <= 0:
        return None
    slow = "the slow rank"
    work = sig.steps.rank_work if sig.steps is not None else None
    if work is not None and work.slowest is not None:
        slow = f"rank {work.slowest.row.name}"
    return Saving(round(share, 4), speedup_of(share), condition.format(slow=slow))
