"""Why the collector costs what it does here, from the agent's timings of every collection
(``gc.callbacks``): how much of a step young collections take, how often a full collection
comes and how long each one pauses the step (a full one walks every tracked object, so it
grows with the heap the job keeps). Pure."""

from __future__ import annotations

import statistics

from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.signals.steps import long_window
from gputop.model.budget import Budget
from gputop.vocab import budget as slices

SLICE = slices.GC


def find(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """None without the typical rank's agent timing its collections."""
    if budget is None or sig.steps is None:
        return None
    r = budget.typical
    agent = next((a for a in sig.steps.agents if a.pid == r.pid), None)
    timed = [s for s in long_window(agent) if s.gc_ns is not None] if agent is not None else []
    if not timed:
        return None
    young = [s.gc_ns or 0 for s in timed if not s.gc_full]
    typical_ns = statistics.median(young) if young else 0.0
    full = [s for s in timed if s.gc_full]
    fulls = sum(s.gc_full or 0 for s in full)
    per_step = sum(s.gc_ns or 0 for s in timed) / len(timed) / 1e6
    parts = []
    if fulls:
        each = sum(max(0.0, (s.gc_ns or 0) - typical_ns) for s in full) / fulls / 1e6
        parts.append(f"{fulls} full collection{'s' if fulls > 1 else ''} in the last "
                     f"{len(timed)} steps, ~{each:.0f} ms each")  # fmt: skip
    if young:
        parts.append(f"young collections {statistics.fmean(young) / 1e6:.1f} ms a step")
    text = f"Python's collector pauses the step {per_step:.1f} ms a step: {', '.join(parts)}"
    evidence = (
        Evidence(f"{r.label}: collections timed in {len(timed)} steps, {per_step:.1f} ms a "
                 f"step, {fulls} of them full", "agent"),
    )  # fmt: skip
    return Cause(text, evidence)
