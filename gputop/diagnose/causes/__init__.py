"""The second why: under each finding, the cause found from measurements for this job, the
levers that fit it, and what each lever would save. A cause is a finder for the budget slice
it explains, registered in ``CAUSES`` (one line each); every loss slice has one. Adding a
cause is one module, one line here and one test file under ``tests/unit/diagnose/causes/``
(ARCHITECTURE.md, "How to add a cause"). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gputop.diagnose.bounds import BY_NAME
from gputop.diagnose.causes import (
    comms,
    data,
    epoch_start,
    garbage,
    h2d,
    hung,
    loop,
    side,
    straggler,
)
from gputop.diagnose.findings import Cause, Finding
from gputop.diagnose.lever import Lever, declared
from gputop.diagnose.lever_fit import fitting
from gputop.diagnose.saving import savings_of
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.vocab import budget as slices

Finder = Callable[[RuleInputs, Budget | None], Cause | None]
"""A cause's finder: the rules' inputs and the step-time budget (None: none yet) -> the cause
for this job, or None when what it compares was not measured (never a guess)."""

CAUSES: tuple[tuple[str, Finder], ...] = (
    (slices.DATA, epoch_start.find),
    (slices.DATA, data.find),
    (slices.H2D, h2d.find),
    (slices.COMMS, comms.find),
    (slices.STRAGGLER, straggler.find),
    (slices.EVAL, side.evaluation),
    (slices.CHECKPOINT, side.checkpoint),
    (slices.LOG, side.logging),
    (slices.GC, garbage.find),
    (slices.LOOP, loop.find),
    (slices.STALL, hung.find),
)
"""Each cause: the slice it explains, then its finder. A slice's causes are tried in this
order and the first that finds one is said: a narrower cause goes before its slice's general
one (which says who does the work and what it is made of)."""
EXPLAINED = frozenset(name for name, _ in CAUSES)
"""The slices a cause is registered for."""


def cause_of(slice_name: str, sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """The first registered cause of ``slice_name`` that this job's measurements show."""
    for name, finder in CAUSES:
        if name == slice_name and (found := finder(sig, budget)) is not None:
            return found
    return None


def slice_of(finding: Finding) -> str | None:
    """The budget slice a finding's bound names (its entry's first), None for a bound of no
    slice (a GPU's clocks, memory pressure: they stretch a slice, they are not one)."""
    entry = BY_NAME.get(finding.bound)
    return entry.slices[0] if entry is not None and entry.slices else None


def explain(
    finding: Finding, slice_name: str | None, sig: RuleInputs, budget: Budget | None
) -> Finding:
    """The finding with its cause (its levers first, saving from the slice the cause
    explains; the bound's after, none twice), only levers that fit the job's setup, each with
    what it would save; the first lever's saving is the finding's. ``slice_name``: the slice
    the verdict named it for, else its bound's own (a hang names no budget slice)."""
    slice_name = slice_name or slice_of(finding)
    cause = cause_of(slice_name, sig, budget) if slice_name is not None else None
    levers = finding.levers
    if cause is not None:
        own = declared(cause.levers, slice_name)
        levers = (*own, *(x for x in finding.levers if x not in own))
    levers = fitting(levers, sig)  # never a knob the job lacks
    levers = _sized_by_their_causes(levers, slice_name, cause, sig, budget)
    savings = savings_of(levers, sig, budget)
    first = savings[0] if savings else None
    return replace(finding, cause=cause, levers=levers, saving=first, lever_savings=savings)


def _sized_by_their_causes(
    levers: tuple[str, ...], slice_name: str | None, cause: Cause | None, sig: RuleInputs,
    budget: Budget | None,
) -> tuple[str, ...]:  # fmt: skip
    """Each lever as the cause of the slice it saves from sized it (the collector's levers
    under a side-work finding, sized by the collector's own timings), where that cause offers
    the same lever; the others as they are. Each finder runs once."""
    found: dict[str, Cause | None] = {slice_name: cause} if slice_name is not None else {}
    out = []
    for x in levers:
        if isinstance(x, Lever) and x.band is None and x.saves in EXPLAINED and not x.advice:
            if x.saves not in found:
                found[x.saves] = cause_of(x.saves, sig, budget)
            other = found[x.saves]
            twin = next((y for y in other.levers if y == x), None) if other else None
            if isinstance(twin, Lever) and twin.band is not None:
                x = twin
        out.append(x)
    return tuple(out)
