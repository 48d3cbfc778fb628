"""Stacks from the agent: read in the process, named as py-spy names them, used instead of py-spy
while they arrive, and py-spy again (a hang still named) when a thread holds the GIL in C."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests_support import note_timeline, until

from gputop.agent.paths import socket_path
from gputop.sources.agent_link import AgentLink
from gputop.sources.stack_budget import StackBudget
from gputop.sources.stacks import PySpy, StackSource

REPO = Path(__file__).resolve().parents[2]
WATCH_S = 30
"""How long diagnose watches the job that hangs holding the GIL: hung from 16 s under a busy
core (tests/bench/margins.py), 14 s of margin."""

JOB = r"""
import ctypes, os, queue, sys, threading, time
sys.path.insert(0, os.environ["GPUTOP_REPO"])
import gputop.agent as gt

def park_in_queue():
    queue.Queue().get()

def train(until):
    while time.monotonic() < until:
        with gt.FORWARD:
            x = sum(i * i for i in range(20000))
        time.sleep(0.02)
        gt.step()

def stuck():
    ctypes.PyDLL(None).sleep(600)  # libc's sleep, called with the GIL held

threading.Thread(target=park_in_queue, name="parked", daemon=True).start()
gt.init()
print("ready", flush=True)
train(time.monotonic() + float(sys.argv[1]))
if sys.argv[2] == "hang":
    stuck()
train(time.monotonic() + 600)
"""


def start(tmp_path: Path, seconds: float, then: str) -> subprocess.Popen:
    script = tmp_path / "gil_job.py"
    script.write_text(JOB)
    env = {**os.environ, "GPUTOP_DIR": str(tmp_path / "run"), "GPUTOP_REPO": str(REPO)}
    p = subprocess.Popen([sys.executable, str(script), str(seconds), then], env=env,
                         stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    until(lambda: socket_path(p.pid, tmp_path / "run").exists(), timeout=30,
          what="the agent's socket")  # fmt: skip
    return p


def stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait(10)


def agent_stacks(link: AgentLink, pid: int, timeout: float = 30.0):
    def got():
        link.sample()
        return link.stacks().get(pid)  # a NamedTuple: true once there

    return until(got, timeout, what="the agent's stacks", every=0.2)


def test_the_agent_names_frames_as_py_spy_does(tmp_path):
    p = start(tmp_path, 600, "train")
    try:
        link = AgentLink(p.pid, directories=lambda: [tmp_path / "run"])
        mine = {t.name: t for t in agent_stacks(link, p.pid).threads}
        spied, error = PySpy().dump(p.pid)
    finally:
        stop(p)
    assert error is None and spied is not None, error
    theirs = {t.name: t for t in spied}
    assert "gputop-agent" not in mine  # gputop's own thread is not the job's
    parked, seen = mine["parked"], theirs["parked"]
    assert parked.frames == seen.frames, (parked.frames, seen.frames)
    assert parked.phase == seen.phase == "blocked" and not parked.active
    main = mine["MainThread"]
    assert [f.name for f in main.frames][-2:] == ["train", "<module>"], main.frames
    assert all(f.file == "gil_job.py" for f in main.frames[-2:]), main.frames
    assert main.tid == p.pid and parked.tid != p.pid


def test_with_the_agent_no_py_spy_is_needed(tmp_path):
    p = start(tmp_path, 600, "train")
    try:
        link = AgentLink(p.pid, directories=lambda: [tmp_path / "run"])
        agent_stacks(link, p.pid)
        absent = PySpy()
        absent.binary = None
        source = StackSource(p.pid, spy=absent, agent_stacks=link.stacks, budget=StackBudget())
        sample = source.sample()
    finally:
        stop(p)
    (proc,) = sample.processes
    assert sample.problem is None and proc.error is None and proc.via == "agent"
    assert {"MainThread", "parked"} <= {t.name for t in proc.threads}
    assert proc.age(sample.t) is not None and proc.age(sample.t) < 5


def test_a_hang_holding_the_gil_is_named_from_py_spy(tmp_path):
    """The main thread blocks in a C call that keeps the GIL: the agent's samples and
    heartbeats stop, py-spy reads the process, and the hang is named with its frame."""
    p = start(tmp_path, 4, "hang")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "gputop", "diagnose", "--json", "--pid", str(p.pid),
             "--duration", str(WATCH_S)],
            capture_output=True, text=True, timeout=200,
            env={**os.environ, "GPUTOP_DIR": str(tmp_path / "run")},
        )  # fmt: skip
    finally:
        stop(p)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    note_timeline(doc["timeline"], WATCH_S)
    principal = doc["verdict"]["principal"]
    assert principal and principal["bound"] == "hung", doc["timeline"]
    assert "gil_job.py:" in principal["summary"] and "stuck" in principal["summary"], principal
    texts = " ".join(e["text"] for e in principal["evidence"])
    assert "py-spy" in texts, texts  # who read the stack that shows it
