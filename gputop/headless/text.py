"""A diagnosis's document as the text a terminal shows: the timeline, the verdict with its why,
step budget, evidence and levers, the risks, what else holds, and the notes."""

from __future__ import annotations

from typing import Any

from gputop.render.armed import event_text
from gputop.render.budget import stacked
from gputop.render.compare import comparison_lines, grouped, shift_line
from gputop.render.verdict import said_lines, said_of_json


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


def exit_line(ended: dict[str, Any]) -> str:
    status = "" if ended["exit_code"] is None else f" with status {ended['exit_code']}"
    return f"  {ended['t_s']:>7.1f} s  pid {ended['pid']} exited{status}: nothing more to watch"


def timeline_line(e: dict[str, Any]) -> str:
    label = e["bound"] or (e["note"] or "no bound")
    return f"  {e['t_s']:>7.1f} s  {label}  ({e['confidence']:.0%})"


def armed_line(t_s: float, line: str) -> str:
    """An armed capture's event, in the timeline's columns."""
    return f"  {t_s:>7.1f} s  {line}"


def render(doc: dict[str, Any], timeline: bool = True) -> str:
    """The text form; ``timeline=False`` when its lines were already printed as they came
    (``Feedback``)."""
    lines = ["gputop diagnose"] if timeline else []
    ended = doc.get("target_exit")
    for e in doc["timeline"] if timeline else ():
        if ended and e["t_s"] >= ended["t_s"]:
            lines.append(exit_line(ended))
            ended = None
        lines.append(timeline_line(e))
    if ended and timeline:
        lines.append(exit_line(ended))
    for a in doc.get("armed") or () if timeline else ():
        lines.append(armed_line(a["t_s"], event_text(a)))
    v = doc["verdict"]
    lines.append("")
    p = v["principal"]
    if p is None:
        lines.append(f"verdict: {v['note']}")
    else:
        lines.append(f"verdict: {p['bound']} ({p['confidence']:.0%}): {p['summary']}")
        step = []
        budget = doc.get("budget")
        if budget:
            of = budget["of"]
            step.append(f"step: {stacked(of['shares'], 200)}  [{of['source']}]")
            for r in budget["ranks"] if len(budget["ranks"]) > 1 else ():
                label = f"rank {r['rank']}" if r["rank"] is not None else f"pid {r['pid']}"
                step.append(f"  {label}: {stacked(r['shares'], 200)}")
        lines += said_lines(said_of_json(p), "  ", step=step)
    for risk in v.get("risks") or ():
        lines.append(f"risk: {risk}")
    for f in v["secondary"]:
        lines.append(f"also: {f['bound']} ({f['confidence']:.0%}): {f['summary']}")
        also = said_of_json(f)
        if also.why:  # its cause and the lever that fits it first
            lines += said_lines(also, "  ", evidence=False, levers=1)
    if doc.get("baseline"):
        lines += comparison_lines(doc["baseline"])
    lines += [shift_line(x) for x in grouped(doc.get("shifts") or ())]
    lines.append(f"inputs: {', '.join(v['inputs']) or 'none'}")
    if doc.get("mfu"):
        lines.append(_mfu_line(doc["mfu"]))
    for problem in doc["problems"]:
        lines.append(f"note: {problem}")
    if doc["exit_code"] is not None:
        lines.append(f"the command exited with status {doc['exit_code']}")
    return "\n".join(lines) + "\n"
