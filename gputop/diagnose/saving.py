"""What a lever would save, from the budget: the share of the step the slice it declares
(``Lever.saves``) holds, times how much of it the lever removes (its own figure, else the
slice's estimate here). Pure."""

from __future__ import annotations

from gputop.diagnose.findings import Saving, speedup_of
from gputop.diagnose.lever import Lever
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.vocab import budget as slices

REMOVES: dict[str, tuple[float, str]] = {
    slices.STRAGGLER: (1.0, "if {slow} matched the others"),
    slices.EVAL: (0.5, "if it evaluated half as often"),
    slices.CHECKPOINT: (0.5, "if it saved half as often"),
    slices.LOG: (0.5, "if it logged half as often"),
}
"""Per slice, the share of it a lever aimed at it removes by what the lever is, when no cause
sized it from the job's numbers: the straggler's wait goes when the slow rank matches the
others; an interval doubled halves its side work. A slice not here is sized only by its cause
(the data wait from the loader's numbers, the collector from the agent's timings of each
collection: ``causes/``), or not at all (comms, the loop's own Python, compute: what a bigger
bucket or a moved function saves is not known from the budget)."""


def saving_of(lever: str, sig: RuleInputs, budget: Budget | None) -> Saving | None:
    """None for advice, a lever with no slice (a plain text: one read back from a recording),
    a slice the budget cannot size, or one that holds nothing. The range: the lever's band
    (a cause's spread) over the slice's own (its interval: sampling error and spread)."""
    if not isinstance(lever, Lever) or lever.advice or lever.saves is None:
        return None
    default = REMOVES.get(lever.saves)
    part = lever.removes if lever.removes is not None else default[0] if default else 0.0
    if budget is None or part <= 0:
        return None
    held = budget.slice(lever.saves)
    share = held.share * part
    if share <= 0:
        return None
    least, most = lever.band or (part, part)
    lo, hi = held.interval
    low, high = lo * least, hi * most
    slow = "the slow rank"
    work = sig.steps.rank_work if sig.steps is not None else None
    if work is not None and work.slowest is not None:
        slow = f"rank {work.slowest.row.name}"
    condition = lever.condition or (default[1] if default else "")
    return Saving(share, speedup_of(share), condition.format(slow=slow), low,
                  max(high, share))  # fmt: skip


def savings_of(
    levers: tuple[str, ...], sig: RuleInputs, budget: Budget | None
) -> tuple[Saving | None, ...]:
    """What each lever would save for this job, in their order."""
    return tuple(saving_of(x, sig, budget) for x in levers)
