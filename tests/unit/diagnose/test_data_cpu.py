"""The training thread's CPU in its batch waits: the agent times it, the wire carries it, and
with no DataLoader workers it says whether the main thread makes its batches (cpu-transform)
or sleeps on reads (data-input), whatever share of the step the wait is."""

from __future__ import annotations

import dataclasses
import time

from test_diagnose import agents, host

from gputop.agent.recorder import StepRecorder
from gputop.agent.server import AgentServer
from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.rules import data_input
from gputop.model.step_stats import data_cpu_share
from gputop.model.steps import AgentsSample
from gputop.sources import agent_decode as dec


def _one(**fields):
    item = {"step": 1, "t0_ns": 0, "dur_ns": 1_000_000, "phases": {"data_wait": 900_000}}
    steps, dropped = dec.parse_steps({"steps": [{**item, **fields}]})
    assert dropped == 0  # a bad figure never costs the step
    return steps[0]


def test_the_agent_sends_the_waits_cpu_and_the_monitor_reads_it():
    r = StepRecorder()
    r.step()
    r.data_cpu_ns = 400_000  # what torch_hooks' DataLoader wrapper adds up in a step
    time.sleep(0.001)  # pacing: a step longer than its wait's CPU
    r.step()
    r.step()  # a step with no wait timed
    line = AgentServer(r)._steps_message(list(r.records))
    steps, dropped = dec.parse_steps(dec.decode_line(line.rstrip(b"\n")))
    assert dropped == 0
    assert [s.data_cpu_ns for s in steps] == [None, 400_000, None]


def test_the_waits_cpu_is_checked_never_longer_than_the_step():
    assert _one(data_cpu_ns=250_000).data_cpu_ns == 250_000
    assert _one().data_cpu_ns is None  # an older agent, or no wait timed
    for bad in (-1, True, 1.5, "7", 1_000_001, None):
        assert _one(data_cpu_ns=bad).data_cpu_ns is None, bad


def test_the_share_is_the_cpu_over_the_waits_of_the_steps_that_timed_it():
    steps = [
        _one(data_cpu_ns=900_000),
        _one(data_cpu_ns=0),
        _one(),  # not timed: neither its wait nor its CPU count
    ]
    assert data_cpu_share(steps) == 0.5
    assert data_cpu_share([_one()]) is None
    assert data_cpu_share([_one(data_cpu_ns=0, phases={"forward": 10})]) is None  # no wait


def _loop(
    data_ms: float, cpu: float, holding: str | None = None, cpus: float = 2, runq: float = 0.1
):
    """num_workers=0 (no workers on the host), 100-ms steps with a ``data_ms`` batch wait that
    the training thread spent ``cpu`` of on a CPU; no stack samples."""
    sample = agents({"data_wait": data_ms, "forward": 100 - data_ms})
    timed = tuple(
        dataclasses.replace(a, steps=tuple(
            dataclasses.replace(s, data_cpu_ns=int(s.phases["data_wait"] * cpu))
            for s in a.steps
        ))
        for a in sample.agents
    )  # fmt: skip
    sig = reduce_windows(
        [], [], agents=AgentsSample(sample.target, sample.t, sample.wall, timed),
        host=host(cpus=cpus, running=1, runq=runq),
    )  # fmt: skip
    return dataclasses.replace(sig, holding=holding)


def test_a_short_wait_the_main_thread_computes_through_is_its_own_transform():
    f = data_input(_loop(data_ms=12, cpu=0.95))
    assert f.bound == "data-input/cpu-transform"
    assert f.evidence[-1].text == (
        "the main thread computed through 95% of its batch waits (its CPU time in them, >= 50%):"
        " with no DataLoader workers it makes each batch"
    )
    assert f.evidence[-1].source == "agent"


def test_a_wait_the_main_thread_sleeps_through_is_a_read_not_a_transform():
    assert data_input(_loop(data_ms=60, cpu=0.05)).bound == "data-input"


def test_cpu_transform_once_shown_holds_down_to_its_band():
    assert data_input(_loop(data_ms=60, cpu=0.4)).bound == "data-input"
    held = _loop(data_ms=60, cpu=0.4, holding="data-input/cpu-transform")
    assert data_input(held).bound == "data-input/cpu-transform"


def test_on_saturated_cpus_the_lever_names_the_main_process_alone():
    v, _ = evaluate(_loop(data_ms=60, cpu=0.95, cpus=1, runq=0.5), now=10.0)
    assert v.principal is not None and v.principal.bound == "data-input/cpu-transform"
    assert "the main process already wants 1.0 of the 1-CPU" in v.principal.levers[0], v
