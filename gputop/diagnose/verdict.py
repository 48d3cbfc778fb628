"""The verdict: every rule over the current windows, one principal bound, with hysteresis.

Pure: the caller passes windows and "now"; the small state carried between evaluations is a
value returned and passed back, so replaying the same samples gives the same verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gputop.diagnose.bounds import RULES, PerGpu, Tier, bound, judge
from gputop.diagnose.findings import Finding, Verdict
from gputop.diagnose.rules import stalling, warming_up
from gputop.diagnose.signals import RuleInputs

SWITCH_AFTER = 3
"""Evaluations a new principal must lead in a row before it replaces the current one."""


@dataclass(frozen=True)
class State:
    """The verdict's hysteresis, a value passed between evaluations (so replay recomputes)."""

    principal: str | None = None
    since: float | None = None
    challenger: str | None = None
    streak: int = 0


def rank(findings: Sequence[Finding], ended: bool = False) -> list[Finding]:
    """Fired findings, strongest first: once the target has ``ended``, the bounds that speak
    after an exit (``Bound.after_exit``); then not explained by another (the registry's
    ``explains`` and the finding's own), tier, confidence, then rule priority."""
    order = {f.bound: i for i, f in enumerate(findings)}
    fired = [f for f in findings if f.fired]
    entries = {f.bound: bound(f.bound) for f in fired}
    explained = {b for f in fired for b in (*entries[f.bound].explains, *f.explains)}

    def key(f: Finding) -> tuple:
        return (
            ended and not entries[f.bound].after_exit,
            f.bound in explained,
            -entries[f.bound].tier,
            -round(f.confidence, 1),
            order[f.bound],
        )

    return sorted(fired, key=key)


def on_each_gpu(findings: tuple[Finding, ...], sig: RuleInputs) -> tuple[Finding, ...]:
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
            if (one := judge(entry.rule, replace(sig, gpu=gi))).fired
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


def evaluate(sig: RuleInputs, now: float, state: State = State()) -> tuple[Verdict, State]:
    """Every rule, the principal with hysteresis. The rules see the principal the state holds
    (``RuleInputs.holding``): its own rule keeps it while the evidence stays in the band
    (rules.HOLD), so a share near its threshold does not flip the verdict reading by reading;
    the state is a value, so replay recomputes the same holds."""
    sig = replace(sig, holding=state.principal)
    findings = on_each_gpu(tuple(judge(rule, sig) for rule in RULES), sig)
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
    leader = ranked[0].bound if ranked else None
    by_bound = {f.bound: f for f in findings}
    if state.principal is None or leader == state.principal:
        new = State(leader, state.since if leader == state.principal else now, None, 0)
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
            new = State(leader, now, None, 0)
        else:
            new = State(state.principal, state.since, leader, streak)
    principal = by_bound.get(new.principal) if new.principal else None
    secondary = tuple(f for f in ranked if principal is None or f.bound != principal.bound)
    note = ""
    if principal is None:
        missing = sorted({m for f in findings for m in f.missing})
        note = (
            stalling(sig)
            or warming_up(sig)
            or (
                "no bound stands out yet" + (f" (without: {', '.join(missing)})" if missing else "")
            )
        )
    return Verdict(
        principal, secondary, findings, new.since if principal else None, note, inputs
    ), new
