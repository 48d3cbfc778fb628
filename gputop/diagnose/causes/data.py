"""Why the step waits for its batches, for this job: who makes them (the training thread
itself, with no workers; or the workers, busy or waiting) and what that work is made of,
from the stacks of the threads that do it, grouped by kind (text, images, reads, ...). The
levers follow the kind the frames show (docs/facts/bounds.md, "What consumes a slice").
Pure."""

from __future__ import annotations

from gputop.diagnose.causes.kinds import consumed, levers_for, work_evidence
from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.levers import more_workers, saturated
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.thresholds import WORKERS_WAIT
from gputop.model.budget import Budget
from gputop.model.setup import loader_workers
from gputop.model.slice_work import WORKERS, SliceWork
from gputop.vocab import budget as slices
from gputop.vocab.stacks import FETCH

SLICE = slices.DATA

COMPUTES = 0.5
"""Share of its batch waits the training thread computes through (the agent's clock) from
which, with no workers, it makes its batches itself rather than waits on reads."""


def _workers(sig: RuleInputs) -> int | None:
    """The training loader's workers: the agent's setting, else the processes the host saw."""
    n = loader_workers(sig.steps.fingerprint if sig.steps is not None else None)
    if n is not None:
        return n
    return sig.host.workers if sig.host is not None else None


def _work(sig: RuleInputs, key: str) -> SliceWork | None:
    return sig.stacks.work.get(key) if sig.stacks is not None else None


def find(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """Who makes the batches and what that work is; None when neither the loader's workers
    nor the training thread's share of its wait were measured."""
    workers = _workers(sig)
    wait = ""
    if budget is not None and budget.typical.steps:
        r = budget.typical
        ms = budget.share(SLICE) * r.seconds / r.steps * 1000
        wait = f" ({ms:.0f} ms a step)"
    if workers == 0:
        return _own_thread(sig, wait)
    if workers:
        return _from_workers(sig, workers, wait)
    return None


def _own_thread(sig: RuleInputs, wait: str) -> Cause | None:
    """No workers: the training thread makes each batch in its wait, computing or reading."""
    cpu = sig.steps.data_cpu if sig.steps is not None else None
    work = _work(sig, FETCH)
    if cpu is None and work is None:
        return None
    evidence: list[Evidence] = []
    doing = ""
    if cpu is not None:
        evidence.append(
            Evidence(f"the training thread computes through {cpu:.0%} of its batch waits "
                     "(its CPU clock in them)", "agent")
        )  # fmt: skip
        doing = (
            f", computing through {cpu:.0%} of it"
            if cpu >= COMPUTES
            else f", asleep through {1 - cpu:.0%} of it (reading, not computing)"
        )
    text = f"the training thread makes each batch itself (num_workers=0){wait}{doing}"
    if work is not None:
        text += f": {consumed(work)}"
        evidence += work_evidence("the training thread's fetch", work)
    # workers first (the free knob, sized against the CPUs as the bound sizes it), unless the
    # CPUs are saturated: then the bound's own first lever says so
    first = [] if saturated(sig) is not None else [more_workers(sig, {"num_workers": 0})]
    return Cause(text, tuple(evidence), (*first, *levers_for(work, SLICE)))


def _from_workers(sig: RuleInputs, workers: int, wait: str) -> Cause | None:
    """Workers that compute (their CPU) and what they compute, or workers that wait."""
    h = sig.host
    busy = (
        None if h is None else h.workers_demand if h.workers_demand is not None else h.workers_busy
    )
    work = _work(sig, WORKERS)
    if busy is None and work is None:
        return None
    evidence: list[Evidence] = []
    state = ""
    if busy is not None:
        evidence.append(Evidence(f"each DataLoader worker wants {busy:.0%} of a core (CPU "
                                 "plus its wait for one)", "host"))  # fmt: skip
        state = (
            f", each busy {busy:.0%} of a core" if busy >= WORKERS_WAIT
            else f", each using {busy:.0%} of a core: they wait rather than compute"
        )  # fmt: skip
    text = f"{workers} DataLoader worker{'s' if workers > 1 else ''} cannot keep up{wait}{state}"
    if work is not None:
        text += f": {consumed(work)}"
        evidence += work_evidence("the workers' fetch", work)
    return Cause(text, tuple(evidence), levers_for(work, SLICE))
