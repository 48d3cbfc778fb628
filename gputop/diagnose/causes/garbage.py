"""Why the collector costs what it does here, from the agent's timings of every collection
(``gc.callbacks``): how much of a step young collections take, how often a full collection
comes and how long each one pauses the step (a full one walks every tracked object, so it
grows with the heap the job keeps). Pure."""

from __future__ import annotations

import statistics

from gputop.diagnose.bound_levers import GC_LEVERS, MANUAL_EVERY
from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.lever import Lever, sized
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.vocab import budget as slices

SLICE = slices.GC
FULLS_GONE = 0.8
"""Share of full collections' time higher thresholds take away. A full collection comes once
the objects promoted since the last exceed a quarter of the long-lived ones (CPython's rule),
so each walks about four old objects for every new one; rare fulls stop re-walking the old
ones, and every object is still walked once (docs/facts/bounds.md, "GC levers")."""


def find(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """None without the typical rank's agent timing its collections."""
    if budget is None or sig.steps is None:
        return None
    r = budget.typical
    rank = sig.steps.of(r.pid)
    timed = [s for s in rank.long if s.gc_ns is not None] if rank is not None else []
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
    young_ms = sorted(y / 1e6 for y in young) or [0.0]
    pauses = sorted((s.gc_ns or 0) / 1e6 - young_ms[len(young_ms) // 2] for s in full)
    return Cause(text, evidence, _levers(per_step, young_ms, pauses, len(timed), fulls))


def _levers(
    per_step: float, young_ms: list[float], pauses: list[float], steps: int, fulls: int
) -> tuple[Lever, ...]:
    """The collector's levers sized by its own timings (ms): ``young_ms`` each step's young
    collections (sorted), ``pauses`` each full collection's step less the typical young
    (sorted), over ``steps`` steps with ``fulls`` full collections.

    Higher thresholds make full collections rare; young ones stay, since each object is
    walked once per generation it passes through whatever the thresholds. Of what the fulls
    cost, FULLS_GONE goes (docs/facts/bounds.md, "GC levers"). gc.disable() with a manual
    gc.collect() every MANUAL_EVERY steps leaves one full pause per that many steps."""
    if per_step <= 0:
        return GC_LEVERS
    full_ms = sum(pauses) / steps
    # the young share in a full collection's step is known to its quartiles only
    least = sum(max(0.0, x + young_ms[len(young_ms) // 2] - young_ms[-1]) for x in pauses)
    most = sum(x + young_ms[len(young_ms) // 2] - young_ms[0] for x in pauses)
    threshold, manual, *rest = GC_LEVERS
    out: list[Lever] = []
    if full_ms > 0:
        out.append(sized(threshold, SLICE, FULLS_GONE * full_ms / per_step,
                         (FULLS_GONE * least / steps / per_step, most / steps / per_step),
                         f"if its {fulls} full collections in {steps} steps became rare "
                         "(young ones stay)"))  # fmt: skip
    else:  # young collections only: the thresholds save what the young walk twice, unknown
        out.append(threshold)
    if pauses:
        left = (pauses[0] / MANUAL_EVERY, pauses[-1] / MANUAL_EVERY)
        typical = pauses[len(pauses) // 2] / MANUAL_EVERY
        out.append(sized(manual, SLICE, 1 - typical / per_step,
                         (1 - left[1] / per_step, 1 - left[0] / per_step),
                         f"with one {pauses[len(pauses) // 2]:.0f}-ms collection every "
                         f"{MANUAL_EVERY} steps"))  # fmt: skip
    else:
        out.append(manual)
    return (*out, *rest)
