"""Before and after as people and programs read them: this run against the job's last one
(``diagnose.run_compare``) and the shifts of step time inside a run (``diagnose.step_shift``).
Each is made into its JSON document first (``diagnose --json``'s ``baseline`` and ``shifts``,
docs/diagnose.md), and the lines every output shows (the verdict pane, the why screen,
``diagnose``, the report) are made from that document, so a change reads the same everywhere,
from a live session or from a file."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from gputop.diagnose import Change, Comparison, Shift
from gputop.vocab import budget as b


def change_doc(step: Change) -> dict[str, Any]:
    """A change of the mean step with its interval, as the JSON says it."""
    return {
        "rel": step.rel,
        "interval": [step.low, step.high] if math.isfinite(step.margin) else None,
        "distinguishable": step.distinguishable,
        "settled": step.settled,
    }


def comparison_doc(c: Comparison) -> dict[str, Any]:
    """``diagnose --json``'s ``baseline``."""
    step = c.step
    lever = c.lever
    return {
        "last": {
            "started": round(c.last.started, 3),
            "steps": c.last.run.steps,
            "principal": c.last.principal,
            "version": c.last.version,
        },
        "steps": step.after.steps,
        "step_s": {"before": step.before.value, "after": step.after.value},
        "change": change_doc(step),
        "slices": [
            {"slice": s.name, "before": s.before, "after": s.after, "margin": s.margin}
            for s in c.slices
        ],
        "changed": [{"name": k, "before": x, "after": y} for k, x, y in c.changed],
        "lever": None
        if lever is None
        else {
            "text": lever.lever.text,
            "saves": lever.lever.saves,
            "setting": lever.setting,
            "before": lever.before,
            "after": lever.after,
            "predicted": None
            if lever.lever.low is None or lever.lever.high is None
            else [-lever.lever.high, -lever.lever.low],
            "predicted_mid": None if lever.lever.share is None else -lever.lever.share,
            "by_words": lever.by_words,
        },
    }


def shift_docs(
    shifts: Sequence[tuple[Shift, str, float]], latest: Change | None = None
) -> list[dict[str, Any]]:
    """``diagnose --json``'s ``shifts``: each with its rank's label (``SessionState.shifts``),
    the latest with its steps since against before (``latest``, ``SessionState.shift_change``)."""
    docs = [
        {
            "rank": label,
            "pid": s.pid,
            "step": s.step,
            "before_s": s.before_s,
            "after_s": s.after_s,
            "rel": s.rel,
            "moved_s": dict(s.moved),
            "slices": [k for k, _ in s.slices_moved()],
            "change": None,
        }
        for s, label, _ in shifts
    ]
    if docs and latest is not None:
        docs[-1]["change"] = change_doc(latest)
    return docs


def _ms(seconds: float) -> str:
    ms = 1000 * seconds
    return f"{ms:.3g} ms" if abs(ms) < 1000 else f"{seconds:.3g} s"


def _pct(x: float, sign: bool = False) -> str:
    digits = 1 if abs(x) < 0.1 else 0
    text = f"{100 * x:.{digits}f}%"
    return "+" + text if sign and x > 0 else text


def change_words(change: dict[str, Any]) -> str:
    """ "-18% ±2%", "-1.5% ±3%, not yet distinguishable", "+3% (too few steps yet)"."""
    rel = change["rel"]
    if not change["settled"] or change["interval"] is None:
        return f"{_pct(rel, True)} (too few steps yet)"
    lo, hi = change["interval"]
    text = f"{_pct(rel, True)} ±{_pct((hi - lo) / 2)}"
    return text if change["distinguishable"] else f"{text}, not yet distinguishable"


def comparison_lines(doc: dict[str, Any]) -> list[str]:
    """The comparison: the step, the slices that moved, the lever checked, what changed."""
    last, step = doc["last"], doc["step_s"]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(last["started"]))
    out = [
        f"vs last run ({when}, {last['steps']} steps): step {_ms(step['before'])} -> "
        f"{_ms(step['after'])}, {change_words(doc['change'])}"
    ]
    out += [
        f"  {b.NAMES.get(s['slice'], s['slice'])} {round(100 * s['before'])}% -> "
        f"{round(100 * s['after'])}%"
        + ("" if abs(s["after"] - s["before"]) > s["margin"] else " (within its interval)")
        for s in doc["slices"]
    ]
    lever = doc["lever"]
    if lever is not None:
        predicted = "no estimate (the budget could not size it)"
        if lever["predicted"] is not None and lever["predicted_mid"] is not None:
            lo, hi = lever["predicted"]
            predicted = _pct(lever["predicted_mid"], True)
            if hi > lo:
                predicted += f" ({_pct(lo, True)} to {_pct(hi, True)})"
        how = "" if lever["by_words"] else " (the one change, and its slice shrank)"
        out.append(
            f"  {lever['setting']} {lever['before'] or '-'} -> {lever['after'] or '-'} is the "
            f"last run's lever{how}: predicted {predicted}, measured {change_words(doc['change'])}"
        )
    changed = doc["changed"]
    if changed:
        shown = [f"{c['name']} {c['before'] or '-'} -> {c['after'] or '-'}" for c in changed[:4]]
        more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
        out.append("  changed: " + "; ".join(shown) + more)
    else:
        out.append("  same settings and arguments as the last run")
    return out


TOGETHER_STEPS = 24
"""Shifts of several ranks this close (same direction) are one shift of the job, said once:
a DDP job's ranks move together."""


def grouped(docs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Shifts as said: ranks that shifted together (TOGETHER_STEPS, same direction) as one,
    the first's figures with every rank's label ("ranks 0, 1, 2")."""
    out: list[dict[str, Any]] = []
    for d in docs:
        last = out[-1] if out else None
        if (
            last is not None
            and abs(d["step"] - last["step"]) <= TOGETHER_STEPS
            and (d["rel"] > 0) == (last["rel"] > 0)
            and d["rank"] not in last["ranks"]
        ):
            last["ranks"].append(d["rank"])
            last["change"] = d.get("change") or last.get("change")
            continue
        out.append({**d, "ranks": [d["rank"]]})
    return out


def shift_line(doc: dict[str, Any]) -> str:
    """One shift (or ranks' shifts together, ``grouped``): where, from and to, and the slices
    that moved."""
    moved = ", ".join(
        f"{b.NAMES.get(k, k)} {'+' if doc['moved_s'][k] > 0 else '-'}"
        f"{_ms(abs(doc['moved_s'][k]))}/step"
        for k in doc["slices"][:3]
    )
    ranks = doc.get("ranks") or [doc["rank"]]
    if len(ranks) > 1:
        rank = "ranks " + ", ".join(map(str, ranks[:8])) + (" ..." if len(ranks) > 8 else "")
    else:
        rank = ranks[0] if str(ranks[0]).startswith("pid") else f"rank {ranks[0]}"
    since = f"; since then {change_words(doc['change'])}" if doc.get("change") else ""
    return (
        f"step time shifted at step {doc['step']} ({rank}): {_ms(doc['before_s'])} -> "
        f"{_ms(doc['after_s'])} ({_pct(doc['rel'], True)})"
        + (f": {moved}" if moved else "")
        + since
    )
