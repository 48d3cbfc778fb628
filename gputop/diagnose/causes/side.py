"""The shape every side-work cause shares (evaluation, checkpointing, logging): how often it
comes and how long each pass takes (the agent's steps: ``passes.py``), and what the main
thread does in it (its stacks, by kind: ``kinds.py``). The interval lever is sized by these
numbers: doubling the interval halves the slice. Pure."""

from __future__ import annotations

from gputop.diagnose.bound_levers import framework_side
from gputop.diagnose.causes.kinds import consumed, levers_for, work_evidence
from gputop.diagnose.causes.passes import Passes, passes
from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.lever import Lever, sized
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.vocab import budget as slices
from gputop.vocab import stacks as stack


def side_cause(
    sig: RuleInputs, budget: Budget | None, slice_name: str, what: str, verb: str, phase: str
) -> Cause | None:
    """``what`` ("an evaluation pass") with its cadence and cost, and what the main threads
    do in ``phase`` (a stack phase); None when neither was measured. ``verb`` says the
    interval lever ("evaluate every ~50 steps")."""
    p = passes(sig, budget, slice_name)
    work = sig.stacks.work.get(phase) if sig.stacks is not None else None
    if p is None and work is None:
        return None
    evidence: list[Evidence] = []
    levers: list[Lever] = []
    if p is not None:
        text = p.said(what)
        label = budget.typical.label if budget is not None else "the job"
        evidence.append(Evidence(f"{label}: {slices.NAMES[slice_name]} in {p.count} of its "
                                 f"last {p.steps} steps, {p.each_ms:.0f} ms each (median)",
                                 "agent"))  # fmt: skip
        fp = sig.steps.fingerprint if sig.steps is not None else {}
        own = framework_side(fp, slice_name)  # the framework's own setting, when it has one
        if own:
            levers += own
        elif not p.every_step:  # periodic: a longer interval takes its share away
            levers.append(_interval_lever(p, slice_name, verb))
    else:
        text = f"{slices.NAMES[slice_name]} in the main thread's stacks"
    if work is not None:
        text += f": {consumed(work)}"
        evidence += work_evidence(f"the main thread in {slices.NAMES[slice_name]}", work)
    levers += levers_for(work, slice_name)
    return Cause(text, tuple(evidence), tuple(levers))


def _interval_lever(p: Passes, slice_name: str, verb: str) -> Lever:
    """Its interval doubled: half the passes, so half the slice the budget measured (the one
    budget every number comes from); the range from the passes' quartiles against their
    median (the next passes may be shorter or longer than those the slice holds)."""
    k = max(1, round(p.every))
    low, high = (0.5 * ms / p.each_ms if p.each_ms > 0 else 0.5 for ms in p.spread_ms)
    return sized(f"{verb} every ~{2 * k} steps instead of every ~{k}", slice_name, 0.5,
                 (low, high), f"if its {p.each_ms:.0f}-ms passes came every {2 * k} steps, "
                 f"not {k}")  # fmt: skip


def evaluation(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """The evaluation slice: its passes and what they compute."""
    return side_cause(sig, budget, slices.EVAL, "an evaluation pass", "evaluate", stack.EVAL)


def checkpoint(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """The checkpoint slice: its saves and what they spend (pickling, writing)."""
    return side_cause(sig, budget, slices.CHECKPOINT, "a checkpoint", "save",
                      stack.CHECKPOINT_SAVE)  # fmt: skip


def logging(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """The logging slice: how often it logs and what a log costs."""
    return side_cause(sig, budget, slices.LOG, "logging", "log", stack.LOGGING)
