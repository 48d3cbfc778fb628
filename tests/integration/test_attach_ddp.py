"""The headline use, end to end: a DDP job started the way its author starts it (torchrun, or
``torch.multiprocessing.spawn``), with no gputop code and not started by gputop, is attached by
PID while it trains. The agent is loaded into every rank through the debugger, the ranks are
told apart from the launcher and the DataLoader workers, and the monitor reads forward,
backward, optimizer, gradient sync per rank (the fast rank waiting for the slow one) and the
checkpoints as side work."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from tests_support import free_port, kill_tree, until

pytest.importorskip("torch")

from gputop.commands.target import Attached, attach
from gputop.inject import debugger as dbg
from gputop.inject import load_agent, plan_load
from gputop.sources.agent_link import AgentLink

pytestmark = pytest.mark.skipif(
    dbg.find_debugger() is None or sys.platform != "linux", reason="needs gdb or lldb on Linux"
)

DDP = Path(__file__).resolve().parents[2] / "examples" / "ddp_plain.py"
SLOW_MS = 25.0
LOAD_WAIT_S = 20.0
"""How long the load waits for the agents' sockets: the ranks, training in Python, answer as
soon as the debugger has queued the call; mp.spawn's launcher sits in ``join`` (a C call) and
is waited for all this time, then reported as waiting (it was 60 s: a minute of every CI run
spent on a launcher that never returns)."""


def launch(how: str, agent_dir: Path) -> subprocess.Popen:
    knobs = ["--steps", "100000", "--seconds", "120", "--slow-rank", "1",
             "--slow-ms", str(SLOW_MS), "--checkpoint-every", "5"]  # fmt: skip
    if how == "torchrun":
        argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                "--master-port", str(free_port()), str(DDP), *knobs]  # fmt: skip
    else:
        argv = [sys.executable, str(DDP), "--spawn", "2", "--port", str(free_port()), *knobs]
    env = {**os.environ, "GPUTOP_DIR": str(agent_dir), "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen(argv, env=env, cwd=agent_dir.parent, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip


def ranks_of(tree: Attached, job: subprocess.Popen, timeout: float = 90) -> dict[int, str]:
    """The tree's roles once both ranks are up, from all the monitor's evidence (the tree and
    the stacks: a spawned rank shows ``torch.multiprocessing.spawn``'s ``_wrap``)."""

    def both_ranks() -> dict[int, str] | None:
        tree.stacks.sample()
        sample = tree.host.sample()
        roles = {p.pid: p.role for p in sample.processes}
        if sum(1 for r in roles.values() if r == "rank") == 2:
            return roles
        assert job.poll() is None, job.stderr.read().decode()[-2000:] if job.stderr else ""
        return None

    return until(both_ranks, timeout, what="both ranks told apart", every=0.5)


def median_ms(agent, phase: str) -> float:
    return statistics.median(s.phases.get(phase, 0) for s in agent.steps[-10:]) / 1e6


@pytest.mark.parametrize("how", ["torchrun", "spawn"])
def test_a_ddp_job_started_without_gputop_shows_every_phase_per_rank_once_attached(how, tmp_path):
    agent_dir = tmp_path / "agents"
    agent_dir.mkdir(mode=0o700)
    job = launch(how, agent_dir)
    link = None
    try:
        roles = ranks_of(attach(job.pid), job)
        plan = plan_load(job.pid, roles)
        ranks = sorted(pid for pid, role in roles.items() if role == "rank")
        assert sorted(p.pid for p in plan.todo) == sorted([job.pid, *ranks]), plan.lines()
        report = load_agent(plan, wait_s=LOAD_WAIT_S)
        # the launcher may sit in a C call (mp.spawn's join, torchrun's poll): it gets its
        # agent when that returns; the ranks train in Python and get theirs at once
        assert set(ranks) <= set(report.loaded) and not report.problems, report.line()
        link = AgentLink(job.pid, directories=lambda: [agent_dir])

        def two_ranked() -> list | None:
            agents = [a for a in link.sample().agents if a.rank is not None and len(a.steps) >= 12]
            if len(agents) == 2:
                return agents
            assert job.poll() is None, job.stderr.read().decode()[-2000:] if job.stderr else ""
            return None

        agents = until(two_ranked, timeout=90, what="12 steps from each of the two ranks",
                       every=0.3)  # fmt: skip
        by_rank = {a.rank: a for a in agents}
        assert set(by_rank) == {0, 1} and {a.world_size for a in agents} == {2}
        for a in agents:
            seen = set().union(*(s.phases for s in a.steps[-10:]))
            assert {"forward", "backward", "grad_sync", "optimizer"} <= seen, (a.rank, seen)
        assert any("checkpoint" in s.phases for s in by_rank[0].steps), "rank 0 saves every 5"
        fast, slow = by_rank[0], by_rank[1]
        # the fast rank waits in gradient sync for the slow rank's extra work
        assert median_ms(fast, "grad_sync") > median_ms(slow, "grad_sync") + SLOW_MS * 0.5, (
            median_ms(fast, "grad_sync"),
            median_ms(slow, "grad_sync"),
        )
        assert job.poll() is None, "the job trains on after the agent was loaded"
    finally:
        if link is not None:
            link.close()
        kill_tree(job)
