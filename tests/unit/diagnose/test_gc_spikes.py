"""Garbage collection in steps: the agent times it, the wire carries it, spikes name it."""

from __future__ import annotations

import gc
import threading
import time
from dataclasses import replace
from types import MappingProxyType as M

from gputop.agent.recorder import StepRecorder
from gputop.agent.server import AgentServer
from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.bounds import judge
from gputop.diagnose.rules import side_work
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.signals.steps import step_signals
from gputop.model.step_stats import gc_share
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.sources import agent_decode as dec

# ---- the agent ------------------------------------------------------------------------------


def test_a_full_collection_inside_a_step_is_timed_in_that_step():
    heap = [[] for _ in range(200_000)]  # something for a full collection to traverse
    r = StepRecorder()
    r.watch_gc()
    # only the collection below: threads that other tests left behind (torch.compile's workers)
    # would otherwise collect inside these steps too, and their time would count
    automatic = gc.isenabled()
    gc.disable()
    try:
        r.step()  # a clean boundary
        with r.phases["forward"]:
            t = time.perf_counter_ns()
            gc.collect()
            took = time.perf_counter_ns() - t
        r.step()
        r.step()  # a step with no collection of its own
    finally:
        r.unwatch_gc()
        if automatic:
            gc.enable()
    del heap
    _, _, t0, t1, durations, *_, gc_ns, gc_full = r.records[1]
    assert gc_full >= 1
    assert 0.5 * took <= gc_ns <= took <= t1 - t0
    assert durations[r.names.index("forward")] >= gc_ns  # the pause is inside the phase
    assert r.records[2][-1] == 0 and r.records[2][-2] < gc_ns


def test_young_collections_count_time_but_not_as_full():
    r = StepRecorder()
    r.watch_gc()
    try:
        r.step()
        gc.collect(0)
        r.step()
    finally:
        r.unwatch_gc()
    *_, gc_ns, gc_full = r.records[1]
    assert gc_ns > 0 and gc_full == 0


def test_a_collection_in_another_thread_stalls_the_step_too():
    r = StepRecorder()
    r.watch_gc()
    try:
        r.step()
        worker = threading.Thread(target=gc.collect)
        worker.start()
        worker.join()
        r.step()
    finally:
        r.unwatch_gc()
    assert r.records[1][-1] >= 1


def test_gc_is_unknown_until_watched_and_the_callback_goes_with_the_agent():
    r = StepRecorder()
    r.step()
    assert r.records[0][-2:] == (None, None)  # not timed is not "no GC"
    r.watch_gc()
    r.watch_gc()  # idempotent
    assert gc.callbacks.count(r._gc_cb) == 1
    cb = r._gc_cb
    r.disable()  # what a forked DataLoader worker does: no callback left behind
    assert cb not in gc.callbacks
    r.watch_gc()  # a disabled agent stays off
    assert r._gc_cb is None


def test_the_callback_never_raises_into_the_collector():
    r = StepRecorder()
    r._on_gc("start", {})
    r._on_gc("stop", {})  # no "generation": counted, not raised
    assert r.errors == 1
    r._on_gc("stop", {"generation": 2})  # a stop without its start is ignored
    assert r.gc_full == 0


# ---- the wire ---------------------------------------------------------------------------------


def _one(**fields):
    item = {"step": 1, "t0_ns": 0, "dur_ns": 1_000_000, "phases": {"forward": 900_000}}
    steps, dropped = dec.parse_steps({"steps": [{**item, **fields}]})
    assert dropped == 0  # a bad GC figure never costs the step
    return steps[0]


def test_the_agent_sends_gc_and_the_monitor_reads_it():
    r = StepRecorder()
    r.watch_gc()
    try:
        r.step()
        gc.collect()
        r.step()
    finally:
        r.unwatch_gc()
    line = AgentServer(r)._steps_message(list(r.records))
    steps, dropped = dec.parse_steps(dec.decode_line(line.rstrip(b"\n")))
    assert dropped == 0
    assert steps[1].gc_full >= 1 and 0 < steps[1].gc_ns <= steps[1].dur_ns


def test_gc_values_are_checked_and_capped():
    s = _one(gc_ns=250_000, gc_full=1)
    assert (s.gc_ns, s.gc_full) == (250_000, 1)
    assert _one().gc_ns is None  # an older agent: not timed
    assert _one(gc_ns=5_000_000, gc_full=1).gc_ns == 1_000_000  # never longer than the step
    for bad in (
        {"gc_ns": -1, "gc_full": 0},
        {"gc_ns": True, "gc_full": 0},
        {"gc_ns": 1.5, "gc_full": 0},
        {"gc_ns": "7", "gc_full": 0},
        {"gc_ns": 10**16, "gc_full": 0},
        {"gc_ns": 100, "gc_full": -3},
        {"gc_ns": 100, "gc_full": 10**7},
        {"gc_ns": 100, "gc_full": False},
        {"gc_ns": 100},  # half a figure is no figure
    ):
        s = _one(**bad)
        assert (s.gc_ns, s.gc_full) == (None, None), bad


# ---- spikes -----------------------------------------------------------------------------------


def _agents(steps: list[StepRecord]) -> AgentsSample:
    state = AgentState(
        pid=100, state="connected", rank=None, local_rank=None, world_size=None, hostname="h",
        argv=(), fingerprint=M({}), steps=tuple(steps), open_phase="forward", open_age_s=0.01,
        since_step_s=0.05, heartbeat_age_s=0.1, agent_errors=0, dropped=0,
    )  # fmt: skip
    return AgentsSample(target=100, t=1.0, wall=0.0, agents=(state,))


def _steps(n=40, every=10, extra_ms=150.0, gc_ms=None, full=1, where="forward", noise=()):
    """Steps of 20 ms forward, 1 ms GC each; every ``every`` steps ``where`` grows by
    ``extra_ms`` of which ``gc_ms`` (default: all of it) is garbage collection."""
    out = []
    for i in range(n):
        ph = {"forward": 20.0, "optimizer": 2.0}
        gc_t, gc_n = 1.0, 0
        if i % every == every - 1:
            ph[where] = ph.get(where, 0.0) + extra_ms
            gc_t, gc_n = 1.0 + (extra_ms if gc_ms is None else gc_ms), full
        if i in noise:
            ph["forward"] += 15.0  # a noisy machine: slow, but no collection
        total = sum(ph.values()) + 0.5
        ns = M({k: int(v * 1e6) for k, v in ph.items()})
        out.append(
            StepRecord(i, int(i * 1e9), int(total * 1e6), ns, gc_ns=int(gc_t * 1e6), gc_full=gc_n)
        )
    return out


def test_spikes_that_are_mostly_gc_are_attributed_to_gc():
    st = step_signals(_agents(_steps()))
    assert st is not None and st.spikes
    assert {s.grew for s in st.spikes} == {"gc (full collections)"}
    assert 0.3 < st.gc_share < 0.6 and st.gc_full == 4
    f = judge(side_work, RuleInputs(None, None, st, None))
    assert f.fired and f.summary == "garbage collection pauses stall training"
    texts = " ".join(e.text for e in f.evidence)
    assert "growing in gc (full collections)" in texts
    assert "Python garbage collection" in texts and "4 full collections in 39 steps" in texts
    assert f.levers[0].startswith("gc.set_threshold(")
    assert "gc.disable() with a manual gc.collect() every 100 steps" in f.levers[1]
    assert not any("checkpoint" in lever for lever in f.levers)


def test_gc_is_counted_over_the_steps_the_spikes_were_found_in():
    # a full collection every 100 steps, none in the last 50: the GC line and the spike line
    # speak of the same 279 steps (it said "0 full collections in 49 steps" under "growing in
    # gc (full collections)")
    steps = [replace(s, t0_ns=s.t0_ns // 10) for s in _steps(n=280, every=100, extra_ms=400)]
    st = step_signals(_agents(steps))  # 0.1 s apart: all within the spike window's 120 s
    assert st.steps < 60 and st.spike_steps == 279 and st.gc_full == 2
    f = judge(side_work, RuleInputs(None, None, st, None))
    texts = " ".join(e.text for e in f.evidence)
    assert f.fired and "2 of 279 steps over 1.5x the median" in texts
    assert (
        "growing in gc (full collections)" in texts and "2 full collections in 279 steps" in texts
    )


def test_young_collections_are_gc_without_full():
    st = step_signals(_agents(_steps(full=0)))
    assert {s.grew for s in st.spikes} == {"gc"}


def test_a_checkpoint_with_a_little_gc_is_still_the_checkpoint():
    st = step_signals(_agents(_steps(extra_ms=400, gc_ms=50, where="checkpoint")))
    assert {s.grew for s in st.spikes} == {"checkpoint"}
    f = judge(side_work, RuleInputs(None, None, st, None))
    texts = " ".join(e.text for e in f.evidence)
    assert f.fired and "growing in checkpoint" in texts and "garbage" not in texts
    assert f.levers[0].startswith("checkpoint less often")


def test_without_gc_timing_the_phase_that_grew_is_named():
    # a forward that grew is the model's own work as far as the agent can tell (noise on a
    # busy machine looks the same): not side work without GC timing to say it was a collection
    steps = [StepRecord(s.step, s.t0_ns, s.dur_ns, s.phases) for s in _steps()]
    st = step_signals(_agents(steps))
    assert st.gc_share is None and {s.grew for s in st.spikes} == {"forward"}
    assert not judge(side_work, RuleInputs(None, None, st, None)).fired


def test_measured_gc_pauses_stand_out_on_a_noisy_machine():
    # 12 slow steps with no collection: too many spikes to call periodic, but the GC ones
    # are measured, so they still count
    noise = {1, 3, 5, 7, 11, 13, 15, 17, 21, 23, 25, 27}
    st = step_signals(_agents(_steps(noise=noise)))
    assert len(st.spikes) > st.steps // 3
    f = judge(side_work, RuleInputs(None, None, st, None))
    assert f.fired and "4 of 39 steps over 1.5x the median" in f.evidence[0].text
    assert "growing in gc (full collections)" in f.evidence[0].text


def test_gc_pauses_are_the_principal_bound():
    v, _ = evaluate(reduce_windows([], [], agents=_agents(_steps())), now=10.0)
    assert v.principal is not None and v.principal.bound == "side-work"
    assert v.principal.levers[0].startswith("gc.set_threshold(")


def test_gc_share_for_the_pane():
    assert gc_share([]) == (None, 0)
    share, full = gc_share(_steps(n=10, every=5))
    assert full == 2 and 0.5 < share < 0.9


def test_the_steps_pane_shows_the_gc_share_after_the_phases():
    from rich.style import Style

    from gputop.ui.panes.steps import step_lines

    a = _agents(_steps()).agents[0]
    bar = step_lines(a, lambda _: Style(), 160)[1].plain
    assert "| gc pauses 4" in bar and "(4 full)" in bar  # ~45%: after "fwd", "opt"
    assert bar.index("gc pauses") > bar.index("opt")
    plain = [StepRecord(s.step, s.t0_ns, s.dur_ns, s.phases) for s in _steps()]
    assert "gc" not in step_lines(_agents(plain).agents[0], lambda _: Style(), 160)[1].plain
