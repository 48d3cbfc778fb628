"""The agent's hot path: what a step record holds, and that it never raises into training."""

from __future__ import annotations

import time

import pytest

from gputop.agent.recorder import MAX_PHASES, NO_PHASE, StepRecorder


def test_phases_accumulate_into_one_step_record():
    r = StepRecorder()
    for _ in range(3):
        with r.phases["data_wait"]:
            time.sleep(0.002)  # pacing: 2 ms in data_wait
    with r.phases["forward"]:
        time.sleep(0.001)  # pacing: 1 ms in forward
    r.step(samples=64, tokens=1000, flops=1e9)
    (rec,) = r.records
    seq, step, t0, t1, durations, samples, tokens, flops = rec[:8]
    inputs, comm, comm_ns, comm_by, data_cpu, gc, full = rec[8:]
    assert inputs is None and comm is None and comm_ns is None  # no forward, no collective
    assert comm_by is None
    assert data_cpu is None  # a user's data_wait marker: no loader wrapper timed its CPU
    assert (seq, step, samples, tokens, flops) == (0, 0, 64, 1000, 1e9)
    assert gc is None and full is None  # GC is timed only once watched
    names = r.names
    assert durations[names.index("data_wait")] >= 6_000_000
    assert durations[names.index("forward")] >= 1_000_000
    assert durations[names.index("backward")] == 0
    assert t1 - t0 >= sum(durations)
    r.step()
    assert r.records[-1][1] == 1 and sum(r.records[-1][4]) == 0  # accumulators were reset


def test_nested_phases_restore_the_open_phase():
    r = StepRecorder()
    with r.phases["forward"]:
        assert r.open_phase[0] == "forward"
        with r.phases["h2d"]:
            assert r.open_phase[0] == "h2d"
        assert r.open_phase[0] == "forward"
    assert r.open_phase[0] is None


def test_user_exceptions_pass_through_untouched():
    r = StepRecorder()
    with pytest.raises(KeyError, match="mine"), r.phases["forward"]:
        raise KeyError("mine")
    assert r.open_phase[0] is None
    assert r.acc[r.names.index("forward")] > 0  # the time until the error still counts


def test_internal_errors_are_counted_not_raised():
    r = StepRecorder()
    r.acc = None  # break the recorder on purpose
    with r.phases["forward"]:
        pass
    r.step()
    assert r.errors == 2


def test_custom_names_are_registered_once_and_capped():
    r = StepRecorder()
    assert r.phase("tokenize") is r.phase("tokenize")
    for i in range(MAX_PHASES * 2):
        r.phase(f"p{i}")
    assert len(r.names) == MAX_PHASES
    assert r.phase("one-too-many") is r.phases["other"]


def test_disabled_recorder_records_nothing():
    r = StepRecorder()
    r.disable()
    with r.phases["forward"]:
        pass
    r.step()
    assert not r.records and r.step_no == 0
    with NO_PHASE:
        pass


def test_history_is_bounded():
    r = StepRecorder(history=10)
    for _ in range(100):
        r.step()
    assert len(r.records) == 10 and r.records[-1][1] == 99


class FakeEvent:
    """CPU stand-in for torch.cuda.Event: done once the fake GPU has caught up."""

    gpu_clock = 0

    def __init__(self) -> None:
        self.at = None

    def record(self) -> None:
        FakeEvent.gpu_clock += 1
        self.at = FakeEvent.gpu_clock

    def query(self) -> bool:
        return self.at <= FakeEvent.done_up_to

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.query() and end.query(), "elapsed_time before completion"
        return (end.at - self.at) * 1.5  # ms


def test_gpu_time_is_resolved_later_without_waiting():
    FakeEvent.gpu_clock, FakeEvent.done_up_to = 0, 0
    r = StepRecorder()
    r.cuda_events = FakeEvent
    with r.phases["forward"]:
        pass
    with r.phases["backward"]:
        pass
    r.step()
    assert not r.gpu_records and r.gpu_backlog == 2  # the GPU is behind: nothing blocks
    FakeEvent.done_up_to = 2  # forward's pair is done, backward's is not
    r.step()
    assert [(s, r.names[p], ns) for _, s, p, ns in r.gpu_records] == [(0, "forward", 1_500_000)]
    FakeEvent.done_up_to = 10
    r.step()
    assert len(r.gpu_records) == 2 and r.gpu_backlog == 0


def test_time_is_exclusive_and_markers_closed_out_of_order_leave_nothing_open():
    r = StepRecorder()
    fwd, h2d = r.phases["forward"], r.phases["h2d"]
    with fwd, h2d:
        time.sleep(0.01)  # pacing: 10 ms with both open
    t0 = r.step_t0
    r.step()
    _, _, start, end, durations, *_ = r.records[-1]
    names = r.names
    assert durations[names.index("h2d")] >= 10_000_000
    assert durations[names.index("forward")] < 5_000_000  # paused while h2d was open
    assert start == t0 and sum(durations) <= end - start
    fwd.__enter__()
    h2d.__enter__()
    fwd.__exit__(None, None, None)  # out of order
    h2d.__exit__(None, None, None)
    r.step()  # the boundary notices nothing is really open
    assert r.open_phase[0] is None
    time.sleep(0.005)  # pacing: time passes with nothing open
    r.step()
    assert sum(r.records[-1][4]) == 0  # no phantom time for a phase closed long ago


def test_an_idle_recorder_records_nothing_and_wakes_clean():
    """An agent loaded by attaching idles once its last monitor leaves: markers take the
    disabled path; woken, the next boundary drops what was open and recording goes on."""
    r = StepRecorder()
    r.step()
    outer = r.phases["forward"]
    outer.__enter__()  # a marker open when the monitor leaves
    r.idle()
    assert not r.on
    with r.phases["backward"]:
        time.sleep(0.001)  # pacing: 1 ms in a marker while idle
    r.step()  # a boundary while idle: nothing recorded
    assert len(r.records) == 1
    r.wake()
    outer.__exit__(None, None, None)  # closed after waking: stale, must not count
    r.step()  # the first boundary after waking starts clean
    assert len(r.records) == 1 and r.user_open == 0 and r.open_id == -1
    with r.phases["data_wait"]:
        time.sleep(0.002)  # pacing: 2 ms in data_wait
    auto = r.auto["forward"]
    assert auto.open() == 1  # automatic phases are not shut by a stale user marker
    auto.close()
    r.step()
    (*_, last) = r.records
    durations = last[4]
    assert durations[r.names.index("data_wait")] >= 2_000_000
    assert durations[r.names.index("backward")] == 0
    assert last[3] - last[2] >= sum(durations)
