"""Armed captures end to end with the capture itself replaced (``gputop/arm/armed.py``): the
capture that fits each event, its manifest's trigger (the verdict, the budget, the steps before
and after), the rate limits of a flapping job, and the disk budget kept with real folders."""

from __future__ import annotations

import os
from dataclasses import replace
from itertools import chain, repeat
from pathlib import Path
from typing import Any

from builders import States, agent, rank_work, step

from gputop.arm import armed as arm
from gputop.arm.armed import Armed
from gputop.capture import manifest
from gputop.capture.folder import new_folder
from gputop.capture.manifest import Manifest
from gputop.model.steps import AgentsSample
from gputop.vocab.arm import TRIGGERS
from gputop.vocab.bounds import COMMS, DATA_INPUT, HUNG, STRAGGLER

ALL = frozenset(TRIGGERS)


class FakeTake:
    """``capture.take``'s shape: a real folder with the manifest it would write, and a file of
    ``size`` bytes; the calls kept."""

    def __init__(self, size: int = 1024) -> None:
        self.calls: list[dict[str, Any]] = []
        self.size = size

    def __call__(self, kind: str, pid: int, root: Path, bounds: Any, cancel: Any, **kw: Any):
        with new_folder(root, kind, host="node", now=1_000 + len(self.calls)) as folder:
            kw["started"](folder.path)
            m = Manifest(id=folder.name, kind=kind, bounds={}, requested_at=0.0,
                         options=kw["options"], trigger=kw["trigger"])  # fmt: skip
            m = replace(m, trigger={**m.trigger, **kw["after"]()}).ended("ok")
            manifest.write(folder, m)
            folder.write("data", b"x" * self.size)
            self.calls.append({"kind": kind, "bounds": bounds, **kw, "manifest": m})
            return m, folder.path


def now(work, _name):  # the capture runs at once, on the caller's thread
    work()


def armed(root: Path, take: FakeTake, triggers=ALL, **kw: Any) -> Armed:
    kw.setdefault("start", now)  # and no reading comes while a capture waits for steps after it
    return Armed(os.getpid(), root, triggers, take=take, age=lambda: 600.0, after_wait_s=0, **kw)


def with_agents(state, *agents):
    return replace(state, agents=AgentsSample(target=1, t=0.0, wall=0.0, agents=agents))


def steps(first: int, n: int, ms: float = 100.0):
    return tuple(step(i, i * 100_000_000, {"forward": ms}) for i in range(first, first + n))


def test_a_hang_takes_two_native_dumps_with_the_verdict_in_their_manifests(tmp_path, monkeypatch):
    monkeypatch.setattr(arm, "HANG_AGAIN_S", 0.0)
    take, s = FakeTake(), States()
    a = armed(tmp_path / "caps", take)
    a.consider(with_agents(s.at(1, HUNG), agent(11, steps(0, 20), rank=0)))
    assert [(c["kind"], c["options"]) for c in take.calls] == [("pyspy-dump", {"native": True})] * 2
    trigger = take.calls[0]["manifest"].trigger
    assert trigger["trigger"] == "hung" and trigger["why"] == "hung: hung summary"
    assert trigger["verdict"]["principal"] == "hung"
    assert [len(r["steps"]) for r in trigger["steps_before"]] == [arm.STEPS_KEPT]
    assert "paused" in trigger["overhead"]
    assert [e.what for e in a.drain()] == ["fired", "started", "ok", "started", "ok"]


def test_a_straggler_is_traced_on_its_rank_and_a_typical_one_where_the_agent_runs(tmp_path):
    take, s = FakeTake(), States()
    a = armed(tmp_path / "caps", take)
    work = rank_work(12, {11: 100.0, 12: 170.0, 13: 102.0})
    state = with_agents(s.at(1, STRAGGLER, inputs=work), agent(11, steps(0, 5)),
                        agent(12, steps(0, 5)), agent(13, steps(0, 5)))  # fmt: skip
    a.consider(state)
    (call,) = take.calls
    assert call["kind"] == "torch-trace" and call["only"] == {12, 13}
    assert call["bounds"].steps == arm.TRACE_STEPS
    assert call["manifest"].trigger["ranks"] == [12, 13]


def test_without_an_agent_a_regression_records_the_tree_with_py_spy(tmp_path):
    take, s = FakeTake(), States()
    a = armed(tmp_path / "caps", take, frozenset({"regression"}))
    s.shift(7, 0.1, 0.2)
    a.consider(s.at(1, COMMS))
    assert [(c["kind"], c["bounds"].seconds) for c in take.calls] == [("pyspy-flame", arm.FLAME_S)]


def test_a_memory_risk_without_cuda_says_no_capture_fits(tmp_path):
    take, s = FakeTake(), States()
    a = armed(tmp_path / "caps", take, frozenset({"memory"}))
    a.consider(with_agents(s.at(1, COMMS, risks=("memory: 93% of the limit",)),
                           agent(11, steps(0, 5))))  # fmt: skip
    assert take.calls == []
    events = a.drain()
    assert [e.what for e in events] == ["fired", "no capture"]
    assert "torch with CUDA" in events[1].why
    cuda = agent(11, steps(0, 5), fingerprint={"cuda": "12.4"})
    b = armed(tmp_path / "caps2", take, frozenset({"memory"}))
    b.consider(with_agents(States().at(1, COMMS, risks=("memory",)), cuda))
    assert [c["kind"] for c in take.calls] == ["memory-snapshot"]


def test_the_steps_after_are_those_the_job_made_once_the_capture_ran(tmp_path):
    s, calls, clock = States(), [], chain([0.95], repeat(2.0))  # fired at 0.95 s
    a = armed(tmp_path / "caps", FakeTake(), start=lambda work, name: calls.append(work),
              clock=lambda: next(clock))  # fmt: skip
    a.consider(with_agents(s.at(0.95, HUNG), agent(11, steps(0, 8))))  # steps 8, 9 unseen yet
    a.consider(with_agents(s.at(2, COMMS), agent(11, steps(0, 14))))  # 4 more steps meanwhile
    calls[0]()
    m = next(e for e in a.drain() if e.what == "ok")
    doc = manifest_of(Path(m.folder))
    after = doc["trigger"]["steps_after"][0]["steps"]  # those started after it fired
    assert [s[0] for s in after] == [10, 11, 12, 13] and after[0][2] == 1.0


def manifest_of(folder: Path) -> dict[str, Any]:
    import json

    return json.loads((folder / "manifest.json").read_text())


def test_a_flapping_job_is_held_to_the_rate_limit_and_the_disk_budget(tmp_path, monkeypatch):
    """Twelve minutes of a principal that changes every 3 s: at most the limits' captures; past
    the disk budget the oldest armed capture goes and the one taken by hand stays."""
    monkeypatch.setattr(arm, "HANG_AGAIN_S", 0.0)
    root = tmp_path / "caps"
    root.mkdir(mode=0o700)
    with new_folder(root, "pyspy-flame", now=10, host="node") as by_hand:
        manifest.write(by_hand, Manifest(id=by_hand.name, kind="pyspy-flame", bounds={},
                                         requested_at=0.0).ended("ok"))  # fmt: skip
        by_hand.write("data", b"h" * 300_000)
    take, s = FakeTake(size=200_000), States()
    a = armed(root, take, budget_bytes=500_000)
    a.watch.hold_s = 0.0
    bounds = (COMMS, DATA_INPUT, HUNG)
    for i in range(240):
        t = 3.0 * (i + 1)
        a.consider(s.at(t, bounds[i % 3], since=t))
    events = a.drain()
    fired = [e for e in events if e.what == "fired"]
    assert 2 <= len(fired) <= 4 and len(take.calls) <= 6  # a hang's two dumps, a verdict's one
    held = [e for e in events if e.what == "held back"]
    assert 1 <= len(held) <= 4 and "not said until it may fire again" in held[0].why
    assert any("held back" in e.why for e in fired[1:])  # the next fire counts them
    assert any(e.what == "removed" for e in events)
    left = sorted(os.listdir(root))
    assert by_hand.name in left and sum(1 for n in left if n != by_hand.name) == 1
