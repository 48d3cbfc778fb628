"""The target is (pid, start time): once it exits, a later process given its PID is neither
sampled, searched for agents, captured nor injected into; and `diagnose` says when it exited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests_support import REPO, until

from gputop.agent.paths import socket_path
from gputop.commands.target import attach
from gputop.sources.target import TargetId, TargetNotFound
from gputop.ui.capture_keys import CaptureKeys
from gputop.ui.screens.load_agent import AgentOffer, TargetGone

SLEEPER = "import time\nwhile True: time.sleep(0.05)"
AGENT_SERVER = (
    "import time, gputop.agent as gt\ngt.init()\nprint('ready', flush=True)\n"
    "while True:\n    gt.step()\n    time.sleep(0.05)"
)
NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def _take_pid(pid: int, argv: list[str], env: dict[str, str]) -> subprocess.Popen | None:
    """Start ``argv`` as PID ``pid`` (root: the kernel hands out ns_last_pid + 1 next)."""
    for _ in range(50):
        NS_LAST_PID.write_text(str(pid - 1))
        p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    return None


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(NS_LAST_PID, os.W_OK),
    reason="reusing a PID on purpose needs root (writes /proc/sys/kernel/ns_last_pid)",
)
def test_a_later_process_given_the_targets_pid_is_not_followed(tmp_path):
    env = {**os.environ, "GPUTOP_DIR": str(tmp_path / "run"), "PYTHONPATH": str(REPO)}
    first = subprocess.Popen([sys.executable, "-c", AGENT_SERVER], env=env, stdout=subprocess.PIPE,
                             text=True)  # fmt: skip
    later = None
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "ready"
        os.environ["GPUTOP_DIR"] = env["GPUTOP_DIR"]  # the link looks where the agent serves
        attached = attach(first.pid)

        def connected() -> bool:
            agents = attached.agents.sample().agents
            return bool(agents and agents[0].state == "connected" and agents[0].steps)

        until(connected, timeout=10, what="the first process's agent")
        first.kill()
        first.wait()
        later = _take_pid(first.pid, [sys.executable, "-c", AGENT_SERVER], env)
        if later is None:
            pytest.skip("could not get the same PID again (another process took it)")
        assert later.stdout is not None and later.stdout.readline().strip() == "ready"

        assert attached.host.sample().state == "exited"
        stacks = attached.stacks.sample()
        assert stacks.processes == ()
        assert "now belongs to another process" in (stacks.problem or "")
        # the later one serves an agent under the same name: once it does, the link is offered
        # it at every sample, and must refuse it each time
        until(socket_path(later.pid, Path(env["GPUTOP_DIR"])).exists, what="its agent's socket")
        for _ in range(5):
            agents = attached.agents.sample().agents
            assert all(a.state != "connected" for a in agents), agents
        keys = CaptureKeys(first.pid, post=lambda v: None, run_thread=lambda w, g: None,
                           identity=attached.identity)  # fmt: skip
        assert "now belongs to another process" in (keys.unavailable("pyspy", None, None) or "")
        assert keys.start("pyspy") is None
        never = lambda *a, **k: pytest.fail("acted on another process")  # noqa: E731
        offer = AgentOffer(first.pid, identity=attached.identity, plan=never, load=never)
        with pytest.raises(TargetGone, match="belongs to another process"):
            offer.plan(None)
        assert "not loaded" in offer.load(object(), progress=lambda line: None)
    finally:
        os.environ.pop("GPUTOP_DIR", None)
        for p in (first, later):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_identity_tells_a_finished_process_from_a_running_one():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    ident = TargetId.of(p.pid)  # running, or already a zombie: still that process
    until(lambda: not ident.alive(), what="the process to finish")
    assert ident.gone() == f"pid {p.pid} has exited"
    p.wait()
    with pytest.raises(TargetNotFound, match=f"no process with PID {p.pid}"):
        TargetId.of(p.pid)
    assert TargetId.of(os.getpid()).alive()


def test_diagnose_says_when_the_target_exited_and_stops_watching(tmp_path):
    """Attached with the agent; the job ends cleanly after ~2 s. The watch ends with it (long
    before its 15 s), the verdict never says hung or stalled, and the exit is reported. (That an
    exited job stays off hung however long one watches it:
    tests/unit/diagnose/test_hang_rule.py.)"""
    script = tmp_path / "short.py"
    script.write_text(
        "import time, gputop.agent as gt\nend = time.monotonic() + 2.5\n"
        "while time.monotonic() < end:\n    gt.step()\n    time.sleep(0.05)\n"
    )
    env = {**os.environ, "GPUTOP_DIR": str(tmp_path / "run"), "PYTHONPATH": str(REPO)}
    job = subprocess.Popen([sys.executable, str(script)], env=env)
    try:
        started = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "gputop", "diagnose", "--pid", str(job.pid), "--json",
             "--duration", "15", "--sim-board", "h100"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        took = time.monotonic() - started
    finally:
        job.wait(timeout=30)
    doc = json.loads(out.stdout)
    ended = doc["target_exit"]
    assert ended is not None and ended["pid"] == job.pid, doc
    assert ended["t_s"] < 14
    assert took < 15, took  # the watch ended at the exit, not at --duration
    after = [e for e in doc["timeline"] if e["t_s"] >= ended["t_s"]]
    assert all(e["bound"] != "hung" for e in doc["timeline"]), doc["timeline"]
    assert not any("no progress" in (e["note"] or "") for e in after), after
    assert doc["verdict"]["principal"]["bound"] == "idle"
    text = subprocess.run(
        [sys.executable, "-c", "import json,sys; from gputop.headless import render; "
         "print(render(json.load(sys.stdin)))"],
        input=out.stdout, env=env, capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    assert f"pid {job.pid} exited" in text
