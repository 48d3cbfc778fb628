"""`gputop --pid P` on a plain trainer started without gputop, in a real terminal: the status
line says the agent is missing, key a asks, y loads it through the debugger, and the step pane
fills. The job keeps running after gputop leaves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_tmux import shell
from tests_support import until

from gputop.inject.debugger import find_debugger

pytestmark = pytest.mark.skipif(find_debugger() is None, reason="needs gdb or lldb")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def tmux(tmp_path):
    yield from shell(tmp_path, 120, 40)


def test_key_a_loads_the_agent_and_the_step_pane_fills(tmux, tmp_path):
    agents = tmp_path / "agents"
    agents.mkdir(mode=0o700)
    env = {**os.environ, "GPUTOP_DIR": str(agents), "PYTHONWARNINGS": "ignore"}
    err = (tmp_path / "job.err").open("w")
    job = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "mlp_plain.py"), "--steps", "10000000", "--seconds", "600",
         "--threads", "1"],
        stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        _load_and_read_steps(tmux, tmp_path, job, agents)
    except AssertionError as e:  # the job's side of the story, if it ended
        tail = (tmp_path / "job.err").read_text()[-2000:]
        raise AssertionError(f"{e}\njob status {job.poll()}; its stderr ends:\n{tail}") from None
    finally:
        job.kill()
        job.wait()
        err.close()


def _load_and_read_steps(tmux, tmp_path, job, agents) -> None:
    """The user's path: the offer, key a, the question, y, the steps, q."""
    config = tmp_path / "config.toml"
    config.write_text("# defaults only\n")
    tmux.type(
        f"GPUTOP_DIR={agents} {sys.executable} -m gputop --pid {job.pid} --interval 0.5 "
        f"--sim-board t4 --config {config}"
    )
    tmux.wait_for("press a to load it", timeout=60)
    tmux.wait_filled(40)  # no agent yet: the GPU's history takes the rows
    tmux.keys("a")
    screen = tmux.wait_for("Load gputop's agent into the running job?", timeout=60)
    assert "pending call" in screen and "needs:" in screen
    tmux.keys("y")
    tmux.wait_for(f"agent loaded into pid {job.pid}", timeout=60)
    screen = tmux.wait_for("opt ", timeout=30)  # the step pane's phases
    assert "waiting for the first steps" not in screen
    assert job.poll() is None
    # the rows the panes leave go to the budget over time and the GPU's history, at any size;
    # the chart takes its rows a frame after the first steps are drawn (until then the GPU's
    # history fills them: a filled screen without it), so it is waited for first
    tmux.wait_for("budget ", timeout=30)

    def both() -> str:  # a frame drawn between two layouts may lack one: polled
        screen = tmux.wait_filled(40)
        return screen if "budget " in screen and "SM clk" in screen else ""

    until(both, timeout=30, what="a filled screen with the budget and SM clk charts", every=0.2)
    tmux.resize(200, 50)
    tmux.wait_filled(50)
    tmux.keys("q")
    tmux.wait_for("READY$")
    assert job.poll() is None, "the job must keep running after gputop leaves"
