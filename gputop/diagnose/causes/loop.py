"""Why the loop's own Python costs what it does: the job's functions the main threads run
outside every training phase (their stacks since they began to train), by share, and what
kind of work they do there (serialising records, numpy, text...). Pure."""

from __future__ import annotations

from gputop.diagnose.causes.kinds import consumed, levers_for, work_evidence
from gputop.diagnose.findings import Cause
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.vocab import budget as slices
from gputop.vocab.stacks import USER_CODE

SLICE = slices.LOOP


def find(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """None when the main threads' stacks were not sampled in their own code."""
    work = sig.stacks.work.get(USER_CODE) if sig.stacks is not None else None
    if work is None:
        return None
    text = f"the loop's own Python between the phases: {consumed(work)}"
    evidence = work_evidence("the main thread in its own code", work)
    return Cause(text, evidence, levers_for(work, SLICE))
