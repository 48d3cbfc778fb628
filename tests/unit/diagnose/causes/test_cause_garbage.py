"""The collector's cause (``diagnose/causes/garbage.py``): young collections a step and full
ones, how often and how long each, from the agent's timings of every collection."""

from __future__ import annotations

from builders import agent, step

from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.bound_levers import GC_THRESHOLD
from gputop.diagnose.causes.garbage import FULLS_GONE
from gputop.model.steps import AgentsSample

PHASES = {"forward": 20.0, "backward": 20.0, "optimizer": 2.0}


def principal(full_every: int, full_ms: float, young_ms: float):
    steps = []
    for i in range(80):
        full = i % full_every == 0
        gc_ms = young_ms + (full_ms if full else 0.0)
        steps.append(step(i, int(i * 1e9), PHASES, dur_ms=42.0 + gc_ms,
                          gc_ns=int(gc_ms * 1e6), gc_full=1 if full else 0))  # fmt: skip
    sig = reduce_windows([], [], agents=AgentsSample(100, 1.0, 0.0, (agent(100, tuple(steps)),)))
    v, _ = evaluate(sig, now=10.0)
    assert v.principal is not None and v.principal.bound == "side-work", v.principal
    return v.principal


def test_full_collections_are_counted_and_each_sized_apart_from_the_young_ones():
    p = principal(full_every=10, full_ms=200.0, young_ms=1.0)
    # steps 10..70 of the 79 usable: 7 full collections, 200 ms each above the young 1 ms
    assert p.cause.text == (
        "Python's collector pauses the step 18.7 ms a step: 7 full collections in the last 79 "
        "steps, ~200 ms each, young collections 1.0 ms a step"
    ), p.cause.text
    assert p.cause.evidence[0].source == "agent"


def test_the_levers_are_sized_by_the_collections_they_would_avoid():
    """18.7 ms a step, 17.7 of it in full collections: higher thresholds take FULLS_GONE of
    the fulls (the young 1 ms stays); a manual collection every 100 steps leaves 2 ms."""
    p = principal(full_every=10, full_ms=200.0, young_ms=1.0)
    gc = p.lever_savings[p.levers.index(GC_THRESHOLD)]
    manual = next(i for i, x in enumerate(p.levers) if x.startswith("gc.disable()"))
    step_ms = 42.0 + 18.7  # the typical step: its phases and its collector
    assert gc is not None and abs(gc.share - FULLS_GONE * 17.7 / step_ms) < 0.01, gc
    assert gc.condition == "if its 7 full collections in 79 steps became rare (young ones stay)"
    assert gc.low <= gc.share <= gc.high
    left = p.lever_savings[manual]
    assert left is not None and abs(left.share - (18.7 - 2.0) / step_ms) < 0.01, left
    assert left.condition == "with one 200-ms collection every 100 steps"


def test_young_collections_alone_leave_the_thresholds_unsized():
    """No full collection in the window: what higher thresholds save of the young ones
    depends on how long the objects live, which the timings do not say."""
    p = principal(full_every=1000, full_ms=0.0, young_ms=8.0)
    assert p.lever_savings[p.levers.index(GC_THRESHOLD)] is None


def test_no_timed_collection_is_no_cause():
    steps = tuple(step(i, int(i * 1e9), {**PHASES, "checkpoint": 30.0}) for i in range(40))
    sig = reduce_windows([], [], agents=AgentsSample(100, 1.0, 0.0, (agent(100, steps),)))
    from gputop.diagnose.budget import budget_of
    from gputop.diagnose.causes import garbage

    assert garbage.find(sig, budget_of(sig)) is None
