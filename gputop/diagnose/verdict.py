"""The verdict: every rule over the current windows, one principal bound, with hysteresis.

Pure: the caller passes windows and "now"; the small state carried between evaluations is a
value returned and passed back, so replaying the same samples gives the same verdicts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gputop.diagnose.bounds import (
    CAUSES,
    COMPUTE_LIMITS,
    RULES,
    SLICE_BOUNDS,
    PerGpu,
    Tier,
    bound,
    judge,
    levers_of,
)
from gputop.diagnose.budget import budget_of
from gputop.diagnose.causes import explain
from gputop.diagnose.findings import Evidence, Finding, Verdict
from gputop.diagnose.risks import risks_of
from gputop.diagnose.rules import pct, stalling, warming_up
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.thresholds import FLOOR, HELD_FLOOR
from gputop.model.budget import Budget, Slice, share_text
from gputop.vocab import budget as slices
from gputop.vocab.bounds import GPU_COMPUTE, HOST_OVERHEAD

SWITCH_AFTER = 3
"""Evaluations a new principal must lead in a row before it replaces the current one."""


@dataclass(frozen=True)
class State:
    """The verdict's hysteresis, a value passed between evaluations (so replay recomputes)."""

    principal: str | None = None
    since: float | None = None
    challenger: str | None = None
    streak: int = 0
    slice: str | None = None
    """The budget slice the principal stands for (None: compute-bound or no budget)."""


def rank(findings: Sequence[Finding], ended: bool = False) -> list[Finding]:
    """Fired findings, strongest first: once the target has ``ended``, the bounds that speak
    after an exit (``Bound.after_exit``); then not explained by another (the registry's
    ``explains`` and the finding's own), tier, confidence, then rule priority."""
    order = {f.bound: i for i, f in enumerate(findings)}
    fired = [f for f in findings if f.fired]
    entries = {f.bound: bound(f.bound) for f in fired}
    explained = {b for f in fired for b in (*entries[f.bound].explains, *f.explains)}

    def key(f: Finding) -> tuple[bool, bool, int, float, int]:
        return (
            ended and not entries[f.bound].after_exit,
            f.bound in explained,
            -entries[f.bound].tier,
            -round(f.confidence, 1),
            order[f.bound],
        )

    return sorted(fired, key=key)


def on_each_gpu(
    findings: tuple[Finding, ...], sig: RuleInputs, budget: Budget | None = None
) -> tuple[Finding, ...]:
    """A bound one GPU can show alone (``Bound.per_gpu``) that the board's means do not show
    is asked of each GPU's readings: the GPUs it holds make one finding that names them ("GPU
    2: power-cap reason 100% of busy time ..."), so a throttled GPU among eight, or each GPU's
    own problem on a board shared by several jobs, is a finding of its own."""
    g = sig.gpu
    if g is None or len(g.per_gpu) < 2:
        return findings
    out = []
    for f in findings:
        entry = bound(f.bound)
        asked = entry.per_gpu is PerGpu.ALWAYS or (
            entry.per_gpu is PerGpu.GPU_VIEW and sig.steps is None
        )
        if f.fired or not asked or entry.rule is None:
            out.append(f)
            continue
        held = [
            (i, one)
            for i, gi in g.per_gpu
            if (one := judge(entry.rule, replace(sig, gpu=gi), budget)).fired
        ]
        out.append(_on_gpus(held) if held else f)
    return tuple(out)


def _on_gpus(held: Sequence[tuple[int, Finding]]) -> Finding:
    """One finding for the GPUs that show the bound: each GPU's evidence under its index, the
    strongest GPU's confidence, impact and levers."""
    first = max((f for _, f in held), key=lambda f: (f.confidence, f.impact))
    which = ", ".join(str(i) for i, _ in held)
    evidence = tuple(replace(e, text=f"GPU {i}: {e.text}") for i, f in held for e in f.evidence)
    return replace(
        first,
        summary=f"{first.summary} (GPU{'s' if len(held) > 1 else ''} {which})",
        evidence=evidence,
    )


SWITCH_POINTS = 0.05
"""A slice replaces the principal one only when larger by this much (five points of the
step): two near-equal slices do not flip reading by reading."""


def holds(x: Slice, floor: float) -> bool:
    """The slice is still a loss at ``floor``: the share its measure vouches for (less its
    sampling error), given the benefit of its spread over the window (a share that moves
    step to step is not below the floor until it is below by more than it moves)."""
    return x.low + x.spread >= floor


def outgrows(top: Slice, keep: Slice) -> bool:
    """``top`` is larger than ``keep`` by SWITCH_POINTS and by one standard error of the
    difference (their margins together): two slices within their intervals do not swap."""
    return top.share - keep.share >= max(SWITCH_POINTS, math.hypot(top.margin, keep.margin))


def _leading_slice(budget: Budget, held: str | None) -> Slice | None:
    """The largest loss slice at or above FLOOR (a held one while it holds at HELD_FLOOR,
    until another outgrows it); None: no loss reaches the floor. A share of stack samples
    must reach it less its sampling error (two dumps of ten are no measured 20%)."""
    losses = budget.losses()
    keep = next((x for x in losses if x.name == held and holds(x, HELD_FLOOR)), None)
    top = next((x for x in losses if x.low >= FLOOR), None)
    if keep is not None and (top is None or not outgrows(top, keep)):
        return keep
    return top


def _share_line(x: Slice) -> str:
    agree = x.agree
    said = f" ({', '.join(agree)} agree)" if len(agree) > 1 else ""
    return f"{slices.NAMES[x.name]} {share_text(x)} of the step{said}"


def _budget_evidence(budget: Budget, x: Slice, why: str) -> Evidence:
    r = budget.typical
    over = f"{r.steps} steps" if r.steps else f"{r.seconds:.0f} s of stack samples"
    return Evidence(f"{_share_line(x)} over {over} of {r.label}{why}", r.source)


def _explained(f: Finding) -> tuple[str, ...]:
    return (*bound(f.bound).explains, *f.explains)


def _for_slice(
    x: Slice, budget: Budget, by_bound: dict[str, Finding], sig: RuleInputs
) -> Finding | None:
    """The principal finding for a loss slice: its cause when one stretches it, else its
    bound's finding led by the slice's share; confidence from the sources' agreement."""
    names = SLICE_BOUNDS[x.name]
    own = next((by_bound[n] for n in names if n in by_bound and by_bound[n].fired), None)
    target = own.bound if own is not None else names[0]
    if x.name == slices.STALL:
        return own  # a hang is the hang rule's to call; until then the note says stalled
    lead = _budget_evidence(budget, x, f" (the largest loss; floor {pct(FLOOR)})")
    for name in CAUSES:
        cause = by_bound.get(name)
        if cause is not None and cause.fired and target in _explained(cause):
            return replace(
                cause,
                summary=f"{slices.NAMES[x.name]} {pct(x.share)} of the step, because "
                f"{cause.summary}",
                evidence=(lead, *cause.evidence),
                confidence=max(cause.confidence, x.confidence),
            )
    summary = f"{slices.NAMES[x.name]} {pct(x.share)} of the step"
    if own is not None:
        return replace(
            own,
            summary=f"{summary}: {own.summary}",
            evidence=(lead, *own.evidence),
            confidence=x.confidence,
            impact=x.share,
        )
    description = f"{summary}: {bound(target).description}"
    return _from_budget(target, x, description, lead, by_bound, sig, budget)


def _from_budget(
    name: str, x: Slice, summary: str, lead: Evidence, by_bound: dict[str, Finding],
    sig: RuleInputs, budget: Budget,
) -> Finding:  # fmt: skip
    """A finding the budget makes for a bound whose rule did not fire (a loop share under the
    rule's own bar, a job computing on a GPU that reads quiet): what the rule read stays as
    its evidence, the levers are the bound's."""
    entry = bound(name)
    quiet = by_bound.get(name)
    return Finding(
        bound=name,
        fired=True,
        confidence=x.confidence,
        summary=summary,
        evidence=(lead, *(quiet.evidence if quiet else ())),
        levers=levers_of(entry, sig, budget),
        impact=x.share,
    )


def _compute_bound(budget: Budget, by_bound: dict[str, Finding], sig: RuleInputs) -> Finding:
    """No loss reaches the floor: the job computes. What limits the compute, when a rule
    says so, is the principal, led by the compute share; else gpu-compute, the good case."""
    x = budget.slice(slices.COMPUTE)
    biggest = budget.losses()[0] if budget.losses() else None
    rest = (
        f"; the largest loss, {slices.NAMES[biggest.name]}, {pct(biggest.share)}"
        if biggest is not None and biggest.share > 0
        else ""
    )
    lead = _budget_evidence(budget, x, f"{rest} (no loss reaches {pct(FLOOR)})")
    for name in COMPUTE_LIMITS:
        f = by_bound.get(name)
        if f is None or not f.fired:
            continue
        if name == HOST_OVERHEAD and not any(e.source == "NVML" and e.supports
                                               for e in f.evidence):  # fmt: skip
            continue  # the loop's own time is its own slice: only tiny kernels limit compute
        return replace(
            f,
            summary=f"compute {pct(x.share)} of the step, limited: {f.summary}",
            evidence=(lead, *f.evidence),
            impact=max(f.impact, x.share),
        )
    own = by_bound.get(GPU_COMPUTE)
    if own is not None and own.fired:
        return replace(
            own,
            summary=f"compute {pct(x.share)} of the step: {own.summary}",
            evidence=(lead, *own.evidence),
            confidence=max(own.confidence, x.confidence),
        )
    summary = f"compute {pct(x.share)} of the step: no loss reaches {pct(FLOOR)}"
    return _from_budget(GPU_COMPUTE, x, summary, lead, by_bound, sig, budget)


def by_budget(
    findings: Sequence[Finding], budget: Budget, held: str | None, sig: RuleInputs
) -> tuple[Finding | None, str | None]:
    """(the principal the budget names, its slice): the largest loss slice at or above the
    floor, through its cause or its bound's finding; else the compute-bound finding."""
    by_bound = {f.bound: f for f in findings}
    x = _leading_slice(budget, held)
    if x is not None:
        return _for_slice(x, budget, by_bound, sig), x.name
    return _compute_bound(budget, by_bound, sig), None


def _held_slice(
    budget: Budget, state: State, by_bound: dict[str, Finding], sig: RuleInputs
) -> Finding | None:
    """The finding for the slice the shown principal stands for, while that slice is still a
    loss in its band (HELD_FLOOR): a challenger then needs SWITCH_AFTER evaluations in a
    row, as between two rules' findings. None: no slice held, or it is gone."""
    if state.slice is None or state.principal is None:
        return None
    x = budget.slice(state.slice)
    if not holds(x, HELD_FLOOR):
        return None
    f = _for_slice(x, budget, by_bound, sig)
    return f if f is not None and f.bound == state.principal else None


def _secondary_order(budget: Budget | None) -> dict[str, float]:
    """Each bound's share of the step by its slices (the levers' order: time they would save)."""
    if budget is None:
        return {}
    out: dict[str, float] = {}
    for x in budget.slices:
        for name in SLICE_BOUNDS[x.name]:
            out[name] = out.get(name, 0.0) + x.share
    return out


def evaluate(sig: RuleInputs, now: float, state: State = State()) -> tuple[Verdict, State]:
    """Every rule, the principal with hysteresis. The principal is the largest measured loss
    of the step-time budget (``budget_of``), led through its cause or its bound's finding; an
    override (a hang) and a job that has ended stay as they were; without a budget (NVML
    alone, the first seconds) the rules' ranking decides. The rules see the principal the
    state holds (``RuleInputs.holding``): its own rule keeps it while the evidence stays in
    the band (rules.HOLD); the state is a value, so replay recomputes the same holds."""
    sig = replace(sig, holding=state.principal)
    still = stalling(sig)  # once: the budget and the note read it
    budget = budget_of(sig, stalled=still is not None)
    findings = on_each_gpu(tuple(judge(rule, sig, budget) for rule in RULES), sig, budget)
    ended = sig.host is not None and sig.host.exited
    ranked = rank(findings, ended)
    inputs = tuple(
        name
        for name, present in (
            ("NVML", sig.gpu),
            ("host", sig.host),
            ("agent", sig.steps),
            ("stacks", sig.stacks and sig.stacks.samples),  # dumps that all failed: none
        )
        if present
    )
    if not inputs:
        return Verdict(
            None,
            (),
            findings,
            None,
            "not enough data yet: no GPU, host, agent or stack readings",
            inputs,
        ), state
    chosen: Finding | None = None
    cut: str | None = None
    override = ranked[0] if ranked and bound(ranked[0].bound).tier is Tier.OVERRIDE else None
    if budget is not None and not ended and override is None:
        chosen, cut = by_budget(findings, budget, state.slice, sig)
        if chosen is None:  # standing still short of a hang: the note says so
            ranked = []
    leader = chosen.bound if chosen is not None else ranked[0].bound if ranked else None
    rules_said = {f.bound: f for f in findings}
    by_bound = dict(rules_said)  # what each bound stands on now: the budget-led ones below
    if chosen is not None:
        by_bound[chosen.bound] = chosen
        # led from the rules' own findings (a led finding led again says its share twice)
        held = _held_slice(budget, state, rules_said, sig) if budget is not None else None
        if held is not None:  # the held slice still costs: it holds for the usual streak
            by_bound[held.bound] = held
    if state.principal is None or leader == state.principal:
        new = State(leader, state.since if leader == state.principal else now, None, 0, cut)
    else:
        streak = state.streak + 1 if state.challenger == leader else 1
        current = by_bound.get(state.principal)
        # a principal whose evidence is gone yields at once; one that still fires holds until
        # the challenger has led SWITCH_AFTER times in a row (no flapping between two findings)
        if (
            streak >= SWITCH_AFTER
            or current is None
            or not current.fired
            or (leader is not None and bound(leader).tier is Tier.OVERRIDE)
            or (ended and not bound(state.principal).after_exit)  # a fact, not evidence
        ):
            new = State(leader, now, None, 0, cut)
        else:
            new = State(state.principal, state.since, leader, streak, state.slice)
    principal = by_bound.get(new.principal) if new.principal else None
    if principal is not None:  # the second why: its cause, the levers that fit, the saving
        principal = explain(principal, new.slice, sig, budget)
    order = _secondary_order(budget)
    secondary = tuple(  # every finding shown carries its cause, its fitting levers, savings
        explain(f, None, sig, budget)
        for f in sorted(
            (f for f in ranked if principal is None or f.bound != principal.bound),
            key=lambda f: -order.get(f.bound, 0.0),
        )
    )
    note = ""
    if principal is None:
        missing = sorted({m for f in findings for m in f.missing})
        note = (
            still
            or warming_up(sig)
            or (
                "no bound stands out yet" + (f" (without: {', '.join(missing)})" if missing else "")
            )
        )
    return Verdict(
        principal,
        secondary,
        findings,
        new.since if principal else None,
        note,
        inputs,
        budget,
        risks_of(sig),
    ), new
