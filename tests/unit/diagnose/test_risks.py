"""Memory near its limit is a risk beside any verdict (``diagnose/risks.py``): the working
set against the limit, its growth, when it gets there and which process grows."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType as M

from builders import agent, host_at, step
from builders import proc as a_proc

from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.risks import memory_risk
from gputop.model import Window
from gputop.model.host import CgroupSample
from gputop.model.steps import AgentsSample

GIB = 1 << 30
MIB = 1 << 20


def host(ws_gib: float, grow_mib_s: float = 0.0, limit_gib: float = 8.0, span: int = 60,
         start_mib: int = 0) -> Window:  # fmt: skip
    """Readings every 2 s over ``span`` s: the working set and the main process's RSS grow
    by ``grow_mib_s`` a second, after ``start_mib`` allocated by the first 10 s (a model)."""
    samples = []
    for t in range(0, span + 1, 2):
        grown = int(grow_mib_s * MIB * t) + (start_mib * MIB if t >= 10 else 0)
        ws = int(ws_gib * GIB) + grown
        main = a_proc(100, "main", rss_bytes=GIB + grown)
        cg = CgroupSample("v2", None, None, None, None, None, int(limit_gib * GIB), "/x", ws, ws,
                          M({}), M({}), 0, "cgroup", M({}))  # fmt: skip
        samples.append(host_at(t, (main,), cgroup=cg))
    return Window(tuple(samples), 0.0, float(span))


def computing() -> AgentsSample:
    steps = tuple(step(i, int(i * 1e9), {"forward": 40, "backward": 40, "optimizer": 5})
                  for i in range(30))  # fmt: skip
    return AgentsSample(target=100, t=1.0, wall=0.0, agents=(agent(100, steps),))


def verdict(window: Window):
    v, _ = evaluate(reduce_windows([], [], agents=computing(), host=window), now=60.0)
    return v


def test_a_computing_job_at_92_percent_of_its_limit_is_told_the_risk():
    v = verdict(host(7.36))
    assert v.principal.bound == "gpu-compute"  # what costs time is unchanged
    assert v.risks == (
        "memory: working set 7.4 of 8.0 GiB (92% of the limit), not growing: one large "
        "allocation from an OOM kill",
    )


def test_growth_says_when_the_limit_comes_and_who_grows():
    (risk,) = verdict(host(6.0, grow_mib_s=2.0)).risks
    assert risk.startswith("memory: working set 6.1 of 8.0 GiB (76% of the limit), +120 MiB/min")
    assert "the limit in ~16 min at this rate (pid 100, main, +120 MiB/min)" in risk


def test_the_growth_is_the_rate_now_not_the_start_ups_allocations():
    (risk,) = verdict(host(6.0, grow_mib_s=2.0, start_mib=1024)).risks
    assert "+120 MiB/min" in risk  # first to last would say +1,144


def test_readings_of_the_cgroup_it_left_do_not_count():
    """A launcher that moves the job into a cgroup with a limit after it started: the first
    readings are of the cgroup it left (its whole container's memory)."""
    w = host(6.0, grow_mib_s=2.0)
    parent = CgroupSample("v2", None, None, None, None, None, None, None, 40 * GIB, 40 * GIB,
                          M({}), M({}), 0, "cgroup", M({}))  # fmt: skip
    samples = tuple(replace(h, cgroup=parent) if h.t < 40 else h for h in w.samples)
    (risk,) = verdict(Window(samples, w.start, w.end)).risks
    assert "+120 MiB/min" in risk


def test_far_from_the_limit_and_steady_is_no_risk():
    assert verdict(host(2.0)).risks == ()
    assert verdict(host(2.0, grow_mib_s=0.001)).risks == ()  # allocator noise
    assert memory_risk(reduce_windows([], [], host=host(2.0, limit_gib=0.0))) is None  # no limit


def test_memory_levers_without_workers_are_about_what_the_process_keeps():
    from gputop.diagnose import bound_levers as levers

    sig = reduce_windows([], [], agents=computing(), host=host(7.6, grow_mib_s=1.0))
    out = levers.host_memory_pressure(sig, None)
    assert out[0].startswith("cap what the training process keeps (pid 100, main)"), out
    assert not any("worker" in lever for lever in out), out
