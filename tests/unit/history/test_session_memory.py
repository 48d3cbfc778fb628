"""The session follows the run: a job watched again is compared with its last run as soon as
each side has steps enough, the run is kept as it goes (a monitor killed loses a minute at
most) and at the end, and a shift of step time inside the run is called, in the state and as
an event for the recording."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from builders import agent, step

from gputop.followed_run import KEEP_S
from gputop.history.store import Memory
from gputop.model.steps import AgentsSample
from gputop.session import Session
from gputop.sinks import Sinks

MS = 1_000_000


def readings(seconds: int, data_ms, workers: int, argv=("train.py", "--lr", "0.1"), t0=0.0):
    """A reading a second of a job stepping 10 times a second (80 ms forward and ``data_ms(n)``
    of data wait at step n), its fingerprint naming its DataLoader's workers."""
    history = []
    t_ns = 0
    for t in range(1, seconds + 1):
        for _ in range(10):
            n = len(history)
            s = step(n, t_ns, {"forward": 80.0, "data_wait": data_ms(n)})
            history.append(s)
            t_ns += s.dur_ns
        a = agent(100, tuple(history[-300:]), argv=argv, cwd="/proj",
                  fingerprint={"dataloader": {"num_workers": workers}})  # fmt: skip
        yield AgentsSample(target=100, t=t0 + t, wall=1.7e9 + t0 + t, agents=(a,))


class Events:
    problem: str | None = None

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str):
        return lambda *a: None

    def event(self, t, wall, kind, data) -> None:
        self.events.append((kind, data))


def watch(memory: Memory, run_id: str, seconds: int, data_ms, workers: int, sinks=None):
    clock = [0.0]
    s = Session((), memory=memory, run_id=run_id, clock=lambda: clock[0], wall=lambda: 1.7e9,
                sinks=sinks)  # fmt: skip
    for r in readings(seconds, data_ms, workers):
        clock[0] = r.t
        s.agents(r)
    return s


def test_a_job_run_again_is_compared_with_its_last_run(tmp_path):
    memory = Memory(tmp_path)
    first = watch(memory, "a", 30, lambda n: 40.0, workers=0)
    assert first.state.comparison is None  # nothing to compare with yet
    assert first.close() == []
    second = watch(Memory(tmp_path), "b", 30, lambda n: 5.0, workers=4)
    c = second.state.comparison
    assert c is not None
    assert c.step.rel == pytest.approx(85 / 120 - 1, abs=0.01)
    assert c.step.distinguishable
    assert c.changed == (("dataloader.num_workers", "0", "4"),)
    assert c.slices[0].name == "data"
    assert c.slices[0].before == pytest.approx(40 / 120, abs=0.01)


def test_a_run_is_kept_as_it_goes_and_replaced_at_the_end(tmp_path):
    memory = Memory(tmp_path)
    s = watch(memory, "a", int(KEEP_S) + 5, lambda n: 20.0, workers=2)
    ((_, runs),) = Memory(tmp_path).jobs()
    kept = runs[0].run.steps
    assert 0 < kept < s.state.run.steps  # kept a minute in, before the end
    s.close()
    ((_, runs),) = Memory(tmp_path).jobs()
    assert len(runs) == 1 and runs[0].run.steps > kept


def test_a_shift_inside_the_run_is_called_and_recorded(tmp_path):
    log = Events()
    s = watch(Memory(tmp_path), "a", 80, lambda n: 20.0 if n < 500 else 60.0, workers=2,
              sinks=Sinks([log]))  # fmt: skip
    ((shift, label, _),) = s.state.shifts
    assert abs(shift.step - 500) <= 3 and label == "0"
    assert [k for k, _ in log.events] == ["step-shift"]
    assert log.events[0][1]["moved_s"]["data"] == pytest.approx(0.04, rel=0.2)
    since = s.state.shift_change  # the steps since, in place against those before
    assert since is not None and since.distinguishable
    assert since.rel == pytest.approx(140 / 100 - 1, abs=0.01)


def test_without_a_memory_nothing_is_kept_or_compared():
    s = Session((), clock=lambda: 0.0)
    for r in readings(20, lambda n: 20.0, workers=0):
        s.agents(r)
    assert s.state.comparison is None and s.state.run is not None and s.state.run.steps > 0
    assert s.close() == []


def test_a_memory_that_cannot_be_used_is_one_problem_and_the_session_goes_on(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    s = watch(Memory(shared / "jobs"), "a", 20, lambda n: 20.0, workers=0)
    (problem,) = s.state.problems
    assert problem.startswith("the job memory is off: ")
    assert s.state.run is not None


def test_a_world_size_known_late_makes_the_key_and_finds_the_last_run(tmp_path):
    """torch.multiprocessing.spawn's ranks know their world size once the process group is
    up: the job is the same job as soon as they say it."""

    def world_from(first: int, size: int, seconds: int):
        for i, r in enumerate(readings(seconds, lambda n: 40.0, workers=0)):
            a = replace(r.agents[0], world_size=None if i < first else size)
            yield AgentsSample(r.target, r.t, r.wall, (a,))

    before = Session((), memory=Memory(tmp_path), run_id="a")
    for r in world_from(0, 2, 20):
        before.agents(r)
    before.close()
    later = Session((), memory=Memory(tmp_path), run_id="b")
    for r in world_from(5, 2, 20):
        later.agents(r)
    assert later.state.comparison is not None  # found once the world size was said
    assert later.remembered().key.world_size == 2
