"""The second why: under the principal, the cause found from measurements for this job, the
levers that fit it, and what the first lever would save. A cause is a finder for the slice it
stretches (``FINDERS``, one module each); adding one is a finder, its levers and a corpus
scenario (ARCHITECTURE.md, "How to add a cause"). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gputop.diagnose.bounds import BY_NAME
from gputop.diagnose.causes.comms import comms_cause
from gputop.diagnose.causes.hung import hung_cause
from gputop.diagnose.causes.straggler import straggler_cause
from gputop.diagnose.findings import Cause, Finding
from gputop.diagnose.fit import fitting
from gputop.diagnose.lever import declared
from gputop.diagnose.saving import savings_of
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.vocab import budget as slices


def _straggler(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    work = sig.steps.rank_work if sig.steps is not None else None
    slow = work.slowest if work is not None else None
    return straggler_cause(sig, budget, slow) if slow is not None else None


def _hung(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    return hung_cause(sig)  # what a frame waits for: no budget slice sizes a hang


Finder = Callable[[RuleInputs, Budget | None], Cause | None]
"""A cause's finder: the rules' inputs and the step-time budget (None: none yet)."""

FINDERS: dict[str, Finder] = {
    slices.STRAGGLER: _straggler,
    slices.STALL: _hung,
    slices.COMMS: comms_cause,
}
"""The slice a cause stretches -> its finder."""


def explain(
    principal: Finding, slice_name: str | None, sig: RuleInputs, budget: Budget | None
) -> Finding:
    """The principal with its cause (its levers first, saving from the slice the cause
    stretches; the bound's after, none twice), only levers that fit the job's setup, each with
    what it would save; the first lever's saving is the principal's."""
    entry = BY_NAME.get(principal.bound)
    if slice_name is None and entry is not None and entry.slices:  # a hang: no budget slice
        slice_name = entry.slices[0]  # leads it, the bound still names the one it stands for
    finder = FINDERS.get(slice_name) if slice_name is not None else None
    cause = finder(sig, budget) if finder is not None else None
    levers = principal.levers
    if cause is not None:
        own = declared(cause.levers, slice_name)
        levers = (*own, *(x for x in principal.levers if x not in own))
    levers = fitting(levers, sig)  # never a knob the job lacks
    savings = savings_of(levers, sig, budget)
    first = savings[0] if savings else None
    return replace(principal, cause=cause, levers=levers, saving=first, lever_savings=savings)
