"""The session: the one live loop every mode drives. What it does with a reading (history,
sinks in order, a simulated board's steering among them, the verdict at the point the readings
define), the state it publishes, and the headless loop's schedule."""

from __future__ import annotations

from typing import Any

import pytest
from builders import device, gpu_sample

from gputop.diagnose.findings import Verdict
from gputop.headless import diagnose
from gputop.model.gpu import GpuSample
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample
from gputop.session import Session
from gputop.sim.steering import BoardSteering
from gputop.sinks import Sinks
from gputop.sources.feeds import NoGpus, feeds


def gpu(t: float, index: int = 0, util: float = 97.0) -> GpuSample:
    return gpu_sample(index, t, util_gpu_pct=util)


def stacks(t: float) -> StacksSample:
    return StacksSample(4242, t, 1.7e9 + t, ())


def agents(t: float) -> AgentsSample:
    return AgentsSample(target=4242, t=t, wall=1.7e9 + t, agents=())


class Log:
    """A sink that notes every call, in order."""

    problem: str | None = None

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail_on = fail_on

    def _note(self, what: str, value: Any) -> None:
        if what == self.fail_on:
            raise OSError("disk full")
        self.calls.append((what, value))

    def start(self, devices, meta) -> None:
        self._note("start", dict(meta))

    def gpu(self, samples) -> None:
        self._note("gpu", samples[0].t)

    def host(self, sample) -> None:
        self._note("host", sample.t)

    def agents(self, sample) -> None:
        self._note("agents", sample.t)

    def stacks(self, sample) -> None:
        self._note("stacks", sample.t)

    def verdict(self, point, verdict) -> None:
        self._note("verdict", point.now)

    def event(self, t, wall, kind, data) -> None:
        self._note("event", (t, kind))

    def close(self) -> None:
        self._note("close", None)


def test_every_reading_goes_to_the_sinks_in_order_then_its_evaluation():
    log = Log()
    s = Session((device(0),), sinks=Sinks([log]), clock=lambda: 99.0, wall=lambda: 1.7e9)
    s.start({"mode": "test"})
    s.gpu([gpu(1.0)])
    s.agents(agents(1.5))
    s.stacks(stacks(1.7))
    s.event("capture", {"id": 1})
    s.close()
    assert log.calls == [
        ("start", {"mode": "test"}),
        ("gpu", 1.0),
        ("verdict", 1.0),
        ("agents", 1.5),
        ("verdict", 1.0),  # the verdict's clock is the newest GPU reading
        ("stacks", 1.7),
        ("verdict", 1.0),
        ("event", (99.0, "capture")),
        ("close", None),
    ]


def test_the_point_is_the_newest_gpu_reading_with_windows_ending_at_their_own_readings():
    s = Session((device(0), device(1)))
    assert s.point() is None
    s.stacks(stacks(5.0))
    assert s.state.verdict is None, "no evaluation before the GPUs' first reading"
    s.gpu([gpu(6.0, 0), gpu(6.2, 1)])
    point = s.state.point
    assert point is not None and point.now == 6.2
    assert point.stacks == (("stacks", 4242), 5.0) and point.host is None
    assert s.state.evaluations == 1


def test_without_gpus_the_other_sources_set_the_clock():
    """No NVML (a machine without a driver): the verdict still forms from the rest."""
    s = Session(NoGpus("no driver").devices)
    s.stacks(stacks(3.0))
    s.agents(agents(4.0))
    assert s.state.point is not None and s.state.point.now == 4.0
    assert s.state.verdict is not None and "NVML" not in s.state.verdict.inputs


def test_a_state_does_not_change_when_later_readings_arrive():
    s = Session((device(0),))
    for t in range(1, 6):
        s.gpu([gpu(float(t))])
    old = s.state
    before = old.gpu_history(0, 60.0)
    for t in range(6, 12):
        s.gpu([gpu(float(t), util=10.0)])
    assert old.gpu_history(0, 60.0) == before and len(before) == 5
    assert old.gpus[0].t == 5.0 and s.state.gpus[0].t == 11.0
    assert old is not s.state and old.evaluations == 5
    with pytest.raises(TypeError):
        old.gpus[0] = gpu(99.0)  # type: ignore[index]


def test_replay_evaluates_only_where_told_and_shows_what_it_is_given():
    log = Log()
    s = Session((device(0),), sinks=Sinks([log]), evaluate_each=False)
    for t in range(1, 5):
        s.gpu([gpu(float(t))])
    assert s.state.verdict is None and s.state.evaluations == 0
    recorded = Verdict(None, (), (), None, "as recorded", ("NVML",))
    computed = s.evaluate(s.point(), lambda v: recorded)
    assert computed is not None and computed is not recorded
    assert s.state.verdict is recorded and s.state.inputs is not None
    assert [c for c in log.calls if c[0] == "verdict"] == [("verdict", 4.0)]


class Follower:
    def __init__(self) -> None:
        self.shares: list[dict[str, float]] = []

    def update(self, shares: dict[str, float]) -> None:
        self.shares.append(shares)


def test_the_simulated_board_follows_the_agents_phases():
    from gputop.model.steps import AgentState, StepRecord

    steps = tuple(
        StepRecord(
            step=i,
            t0_ns=i * 10**8,
            dur_ns=10**8,
            phases={"data_wait": 6 * 10**7, "forward": 4 * 10**7},
        )
        for i in range(6)
    )
    a = AgentState(pid=4242, state="connected", rank=None, local_rank=None, world_size=None,
                   hostname="h", argv=(), fingerprint={}, steps=steps, open_phase=None,
                   open_age_s=None, since_step_s=0.1, heartbeat_age_s=0.1, agent_errors=0,
                   dropped=0)  # fmt: skip
    follower = Follower()
    s = Session((device(0),), sinks=Sinks([BoardSteering(follower)]))
    s.start({})
    s.agents(AgentsSample(target=4242, t=1.0, wall=1.7e9, agents=(a,)))
    assert follower.shares and follower.shares[-1]["data_wait"] == pytest.approx(0.6, abs=0.01)


def test_an_output_that_fails_is_said_once_and_the_session_goes_on():
    broken, fine = Log(fail_on="gpu"), Log()
    s = Session((device(0),), sinks=Sinks([broken, fine]))
    s.gpu([gpu(1.0)])
    s.gpu([gpu(2.0)])
    assert s.state.problems == ("Log stopped: disk full",)
    assert [c for c in fine.calls if c[0] == "gpu"] == [("gpu", 1.0), ("gpu", 2.0)]
    assert s.close() == [], "problems said during the session are not said again at close"


class Counting:
    """A source that counts its reads and returns what ``make`` builds at the fake time."""

    def __init__(self, clock: list[float], make) -> None:
        self.clock, self.make, self.reads = clock, make, 0
        self.devices = (device(0),)
        self.pid = 4242

    def sample(self) -> Any:
        self.reads += 1
        return self.make(self.clock[0])


def test_a_minimum_gap_folds_readings_into_the_next_evaluation():
    clock = [0.0]
    s = Session((device(0),), clock=lambda: clock[0])
    s.min_gap_s = 1.0
    s.gpu([gpu(0.0)])
    assert s.state.evaluations == 1
    clock[0] = 0.4
    s.gpu([gpu(0.4)])
    assert s.state.evaluations == 1 and s.unevaluated
    assert s.settle().evaluations == 2 and not s.unevaluated
    assert s.state.point is not None and s.state.point.now == 0.4
    clock[0] = 1.5
    s.gpu([gpu(1.5)])
    assert s.state.evaluations == 3 and not s.unevaluated


def test_costly_evaluations_are_spaced_to_keep_within_their_share_of_a_core():
    clock, cpu = [0.0], [0.0]

    def costly(seconds: float):
        def read() -> float:
            cpu[0] += seconds  # read before and after: one evaluation costs ``seconds``
            return cpu[0]

        return read

    cheap = Session((device(0),), clock=lambda: clock[0], cpu=costly(0.001))
    dear = Session((device(0),), clock=lambda: clock[0], cpu=costly(0.02))
    for s in (cheap, dear):
        s.evaluate_share = 0.005
    for second in range(20):
        clock[0] = float(second)
        for s in (cheap, dear):
            s.gpu([gpu(clock[0])])
    assert cheap.state.evaluations == 20  # 1 ms each: every reading, as before
    assert dear.state.evaluations == 5 and dear.unevaluated  # 20 ms each: every 4 s (0.5%)
    assert dear.settle().evaluations == 5
    assert dear.settle(force=True).evaluations == 6 and dear.state.point.now == 19.0


def test_the_end_of_the_job_is_evaluated_at_once_whatever_the_gap():
    from types import MappingProxyType

    from gputop.model.host import HostSample

    clock = [0.0]
    s = Session((device(0),), clock=lambda: clock[0], cpu=lambda: 0.0)
    s.min_gap_s = 10.0

    def host(state: str) -> HostSample:
        return HostSample(100, clock[0], 0.0, state, 3 if state == "exited" else None, (),
                          None, "", None, None, MappingProxyType({}))  # fmt: skip

    s.gpu([gpu(0.0)])
    clock[0] = 1.0
    s.host(host("running"))
    assert s.state.evaluations == 1 and s.unevaluated  # within the gap: folded
    clock[0] = 2.0
    s.host(host("exited"))
    assert s.state.evaluations == 2 and not s.unevaluated  # the end: at once
    clock[0] = 3.0
    s.host(host("exited"))
    assert s.state.evaluations == 2  # and once


def test_the_headless_loop_reads_each_source_at_the_tuis_rates():
    clock = [100.0]
    g = Counting(clock, lambda t: [gpu(t)])
    a = Counting(clock, agents)
    st = Counting(clock, stacks)

    def sleep(seconds: float) -> None:
        clock[0] += max(seconds, 0.01)

    session = Session(g.devices, clock=lambda: clock[0], cpu=lambda: 0.0)
    d = diagnose(session, feeds(g, None, a, st, interval=2.0), duration=20.0,
                 clock=lambda: clock[0], sleep=sleep)  # fmt: skip
    assert g.reads == 11  # every 2 s over 20 s, both ends
    assert a.reads == 21  # agents at least every second
    assert st.reads == 21  # py-spy once a second, whatever the interval
    assert session.state.evaluations == 21  # once per round of readings, not once per reading
    assert d.verdict is session.state.verdict and d.timeline


def test_the_headless_loop_ends_at_the_targets_exit_with_it_evaluated():
    """Nothing after the exit changes the verdict: watching on would only make a script wait."""
    from types import MappingProxyType

    from gputop.model.host import HostSample

    clock = [100.0]

    def host(t: float) -> HostSample:
        state = "exited" if t >= 107.0 else "running"
        return HostSample(4242, t, 0.0, state, 0 if state == "exited" else None, (),
                          None, "", None, None, MappingProxyType({}))  # fmt: skip

    def sleep(seconds: float) -> None:
        clock[0] += max(seconds, 0.01)

    g, h = Counting(clock, lambda t: [gpu(t)]), Counting(clock, host)
    session = Session(g.devices, clock=lambda: clock[0], cpu=lambda: 0.0)
    session.min_gap_s = 30.0  # the exit is evaluated whatever the gap
    d = diagnose(session, feeds(g, h, interval=2.0), duration=30.0,
                 clock=lambda: clock[0], sleep=sleep)  # fmt: skip
    assert d.target_exit == {"t_s": 8.0, "pid": 4242, "exit_code": 0}
    assert h.reads == 5 and clock[0] == 108.0  # at 100, 102, ... 108: the first that saw it
    assert session.state.host is not None and session.state.host.state == "exited"
    assert session.state.point is not None and session.state.point.now == 108.0


def test_without_the_agents_phases_the_stacks_steer_the_simulated_board():
    """A process attached by PID with no agent: busy while its main thread is in backward."""
    from gputop.model.stacks import Frame, ProcessStacks, ThreadStack

    def dump(t: float, phase: str) -> StacksSample:
        f = Frame("fn", "train.py", 1)
        main = ThreadStack(4242, "MainThread", True, (f,), phase, f)
        return StacksSample(4242, t, 1.7e9 + t, (ProcessStacks(4242, "main", (main,), None, 0.0),))

    follower = Follower()
    s = Session((device(0),), sinks=Sinks([BoardSteering(follower)]))
    s.start({})
    for i in range(10):
        s.stacks(dump(float(i), "backward" if i % 2 else "data wait"))
    assert follower.shares[-1]["backward"] == pytest.approx(0.5)
    assert follower.shares[-1]["forward"] == 0.0
