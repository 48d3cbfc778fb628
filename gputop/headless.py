"""`gputop diagnose`: the monitor without a screen. Reads every source on a schedule, keeps the
same Timeline and computes the same verdict as the TUI, and reports the verdict timeline and
the final findings, as text or versioned JSON (docs/diagnose.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputop import __version__
from gputop.diagnose import State, Verdict
from gputop.diagnose.findings import Finding
from gputop.diagnose.point import EvalPoint, evaluate_at
from gputop.diagnose.signals import step_signals
from gputop.model import Timeline
from gputop.model.step_stats import Mfu
from gputop.sinks import Sinks
from gputop.snapshot import jsonable

SCHEMA_VERSION = 1


@dataclass
class Diagnosis:
    started: float
    timeline: list[dict[str, Any]] = field(default_factory=list)
    verdict: Verdict | None = None
    problems: list[str] = field(default_factory=list)
    exit_code: int | None = None
    mfu: Mfu | None = None
    """The latest MFU of the main rank (None: no agent steps to compute it over)."""


def diagnose(
    gpu: Any,
    host: Any = None,
    agents: Any = None,
    stacks: Any = None,
    duration: float = 30.0,
    interval: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    follower: Any = None,
    sinks: Sinks | None = None,
) -> Diagnosis:
    """Sample every source each ``interval`` until ``duration`` passes or ``stop()`` is true.
    Every reading and evaluation also goes to ``sinks`` (recorder, exporter) in this order."""
    sinks = sinks if sinks is not None else Sinks()
    tl = Timeline()
    state = State()
    out = Diagnosis(started=clock())
    last_stack = -1e9
    latest_agents = None
    while True:
        now = clock()
        samples = gpu.sample()
        for s in samples:
            tl.append(s.key, s)
        if sinks:
            sinks.gpu(samples)
        if host is not None:
            h = host.sample()
            tl.append(h.key, h)
            if sinks:
                sinks.host(h)
        if agents is not None:
            latest_agents = agents.sample()
            if sinks:
                sinks.agents(latest_agents)
            if follower is not None:
                steps = step_signals(latest_agents)
                if steps is not None and steps.shares:
                    follower.update(steps.shares)
        if stacks is not None and now - last_stack >= 1.0:
            last_stack = now
            st = stacks.sample()
            tl.append(st.key, st)
            if sinks:
                sinks.stacks(st)
            if st.problem and st.problem not in out.problems:
                out.problems.append(st.problem)
        point = EvalPoint(
            now=now,
            host=(("host", host.pid), now) if host is not None else None,
            stacks=(("stacks", stacks.pid), now) if stacks is not None else None,
        )
        verdict, state, sig = evaluate_at(tl, gpu.devices, point, latest_agents, state)
        if sinks:
            sinks.verdict(point, verdict)
            for problem in sinks.problems:
                if problem not in out.problems:
                    out.problems.append(problem)
            sinks.problems.clear()
        out.mfu = sig.steps.mfu_detail if sig.steps is not None else None
        principal = verdict.principal.bound if verdict.principal else None
        if not out.timeline or out.timeline[-1]["bound"] != principal:
            out.timeline.append(
                {
                    "t_s": round(now - out.started, 2),
                    "bound": principal,
                    "confidence": verdict.principal.confidence if verdict.principal else 0.0,
                    "note": verdict.note,
                }
            )
        out.verdict = verdict
        if now - out.started >= duration or stop():
            return out
        sleep(max(0.0, interval - (clock() - now)))


def _finding(f: Finding) -> dict[str, Any]:
    return jsonable(f)


def document(d: Diagnosis, source: dict[str, Any]) -> dict[str, Any]:
    v = d.verdict
    return {
        "schema_version": SCHEMA_VERSION,
        "gputop_version": __version__,
        "source": source,
        "exit_code": d.exit_code,
        "timeline": d.timeline,
        "verdict": {
            "principal": _finding(v.principal) if v and v.principal else None,
            "secondary": [_finding(f) for f in v.secondary] if v else [],
            "note": v.note if v else "no reading",
            "inputs": list(v.inputs) if v else [],
            "held_s": round(d.timeline[-1]["t_s"], 2) if d.timeline else None,
        },
        "findings": [_finding(f) for f in v.findings] if v else [],
        "problems": d.problems,
        "mfu": jsonable(d.mfu) if d.mfu is not None else None,
    }


def _mfu_line(m: dict[str, Any]) -> str:
    peak = f"{round(m['peak_flops'] / 1e12, 1):g} TFLOP/s" if m.get("peak_flops") else "no peak"
    against = f"{m.get('board') or 'unknown board'} {m['precision']} {peak}"
    if m.get("value") is None:
        return f"MFU: not computed: {m.get('note')}"
    # an assumed precision is in the note already, with what the fingerprint lacked
    why = m["note"] if m["precision_assumed"] else f"precision: {m['precision_basis']}"
    if m.get("note") and not m["precision_assumed"]:
        why += f"; {m['note']}"
    return f"MFU {m['value']:.1%} of {against} ({why})"


def render(doc: dict[str, Any]) -> str:
    lines = ["gputop diagnose"]
    for e in doc["timeline"]:
        label = e["bound"] or (e["note"] or "no bound")
        lines.append(f"  {e['t_s']:>7.1f} s  {label}  ({e['confidence']:.0%})")
    v = doc["verdict"]
    lines.append("")
    p = v["principal"]
    if p is None:
        lines.append(f"verdict: {v['note']}")
    else:
        lines.append(f"verdict: {p['bound']} ({p['confidence']:.0%}): {p['summary']}")
        for e in p["evidence"]:
            lines.append(f"  {'+' if e['supports'] else '-'} {e['text']} [{e['source']}]")
        for lever in p["levers"]:
            lines.append(f"  try: {lever}")
    for f in v["secondary"]:
        lines.append(f"also: {f['bound']} ({f['confidence']:.0%}): {f['summary']}")
    lines.append(f"inputs: {', '.join(v['inputs']) or 'none'}")
    if doc.get("mfu"):
        lines.append(_mfu_line(doc["mfu"]))
    for problem in doc["problems"]:
        lines.append(f"note: {problem}")
    if doc["exit_code"] is not None:
        lines.append(f"the command exited with status {doc['exit_code']}")
    return "\n".join(lines) + "\n"
