"""Socket files nobody serves any more: a process killed with its agent running leaves
``agent-<pid>.sock`` behind, and PIDs come round again (pid_max is 32768 on many machines), so
a long-lived runtime directory holds files named for PIDs that live processes now have. Such a
file must never hide the live agent serving from another directory (found on a CI machine whose
/tmp/gputop-0 held 1,800 of them: the link sat on the stale one, "connecting", for good)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests_support import until

from gputop.agent.paths import socket_path
from gputop.sources.agent_link import AgentLink

TRAINER = r"""
import os, sys, time
while len(sys.argv) > 1 and not os.path.exists(sys.argv[1]):  # start the agent when told
    time.sleep(0.02)
import gputop.agent as gt
gt.init(torch_hooks=False)
while True:
    with gt.FORWARD:
        time.sleep(0.002)
    gt.step(samples=8)
"""


def stale_socket(path: Path) -> None:
    """What a killed agent leaves: a socket file with no listener (connect is refused)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(1)
    s.close()  # the file stays, as after SIGKILL


def private(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def start(agent_dir: Path, *go: Path) -> subprocess.Popen:
    """A job with the agent serving in ``agent_dir`` (once ``go`` exists, if given)."""
    return subprocess.Popen(
        [sys.executable, "-c", TRAINER, *map(str, go)],
        env={**os.environ, "GPUTOP_DIR": str(agent_dir), "PYTHONWARNINGS": "ignore"},
    )


def read_steps(link: AgentLink, job: subprocess.Popen, timeout: float = 60.0):
    """The first reading with three steps of the job's agent; the link closed, the job ended."""

    def three_steps():
        sample = link.sample()
        return sample if sample.agents and len(sample.agents[0].steps) >= 3 else None

    try:
        return until(three_steps, timeout, what="three steps of the job's agent", every=0.1)
    finally:
        link.close()
        job.kill()
        job.wait()


def test_a_stale_socket_in_the_monitors_directory_does_not_hide_the_live_agent(
    tmp_path, monkeypatch
):
    mine = private(tmp_path / "mine")  # the monitor's runtime dir: looked at first
    job = start(private(tmp_path / "theirs"))  # where the job was told to serve
    stale_socket(socket_path(job.pid, mine))  # an earlier process with this PID, killed
    monkeypatch.setenv("GPUTOP_DIR", str(mine))
    link = AgentLink(job.pid, pids=lambda: [job.pid])  # default dirs: ours, then the job's
    (agent,) = read_steps(link, job).agents
    assert agent.pid == job.pid and agent.state == "connected"
    assert "forward" in agent.steps[-1].phases
    assert not link.problems  # a dead file is not someone posing as the agent


def test_an_agent_that_starts_where_a_stale_file_was_seen_is_found(tmp_path):
    """The stale file is looked at again: the job's agent, started later, serves at that very
    path (it removes the file first)."""
    d = private(tmp_path / "agents")
    go = tmp_path / "go"
    job = start(d, go)
    stale_socket(socket_path(job.pid, d))
    link = AgentLink(job.pid, pids=lambda: [job.pid], directories=lambda: [d])
    try:
        for _ in range(3):
            assert not link.sample().agents  # nobody answers: no agent yet, not "connecting"
    except AssertionError:
        job.kill()
        raise
    go.touch()
    assert read_steps(link, job).agents[0].pid == job.pid and not link.problems
