"""Plain training scripts (no gputop code) with the agent loaded the way `gputop run` loads
it, read through the monitor's AgentLink: every phase, per rank, with no marker."""

from __future__ import annotations

import ast
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests_support import free_port, job_env, until  # noqa: E402

from gputop.sources.agent_link import AgentLink  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SLOW_MS = 25.0
GRAD_BYTES = 4 * (256 * 512 + 512 + 512 * 10 + 10)
"""The example MLP's gradients (float32), all-reduced once a step: its payload."""


def run_plain(agent_dir: Path, *argv: str, timeout: float = 120):
    """Run ``argv`` with the agent autostarted (as `gputop run` does) and follow every agent in
    its tree until it exits: the last state of each agent that reported steps."""
    env = job_env({**os.environ, "GPUTOP_DIR": str(agent_dir), "PYTHONWARNINGS": "ignore"})
    p = subprocess.Popen(
        [sys.executable, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    link = AgentLink(p.pid, directories=lambda: [agent_dir])
    deadline = time.monotonic() + timeout
    agents: dict = {}
    try:
        while p.poll() is None and time.monotonic() < deadline:
            for a in link.sample().agents:
                if a.steps:
                    agents[a.pid] = a
            time.sleep(0.1)  # pacing: the agents' states read ten times a second until it exits
        for a in link.sample().agents:
            if a.steps:
                agents[a.pid] = a
    finally:
        if p.poll() is None:
            p.kill()
        _, err = p.communicate(timeout=30)
        link.close()
    assert p.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    return sorted(agents.values(), key=lambda a: (a.rank is None, a.rank, a.pid))


def parallel(agent) -> dict:
    """The agent's parallel setup; the backend, once a fingerprint came while the process group
    lived (a run of a second may end before one does), is gloo here."""
    got = dict(agent.fingerprint["parallel"])
    assert got.pop("backend", "gloo") == "gloo", got
    return got


def median(agent, phase: str) -> float:
    """Median ms of ``phase`` over the steps after warm-up."""
    return statistics.median(s.phases.get(phase, 0) for s in agent.steps[3:]) / 1e6


def check_ranks(agents, slow: int) -> None:
    assert [a.rank for a in agents] == [0, 1] and {a.world_size for a in agents} == {2}
    for a in agents:
        assert a.agent_errors == 0
        for s in a.steps[3:]:
            assert {"forward", "backward", "grad_sync", "optimizer"} <= set(s.phases), s
            assert sum(s.phases.values()) <= s.dur_ns  # nothing counted twice
    fast = agents[1 - slow]
    # the fast rank waits for the slow one's extra work; the slow one hardly waits
    assert median(fast, "grad_sync") > median(agents[slow], "grad_sync") + SLOW_MS * 0.5, [
        (median(a, "grad_sync"), median(a, "backward")) for a in agents
    ]
    assert median(fast, "grad_sync") > SLOW_MS * 0.6


def check_in_flight(agents, slow: int, hidden: bool) -> None:
    """Each step says how long its collectives were outstanding; on the rank that waits for
    the slow one, at least the wait (the wait is inside it: on the slow rank itself, a wait()
    that returns late because another thread holds the GIL can outlast it); a blocking loop
    hides none of them behind compute."""
    for a in agents:
        steps = [s for s in a.steps[3:] if "grad_sync" in s.phases]
        assert steps and all(s.comm_ns and s.comm_ns <= s.dur_ns for s in steps), steps
    fast = agents[1 - slow]
    flight = statistics.median(s.comm_ns for s in fast.steps[3:] if s.comm_ns) / 1e6
    wait = median(fast, "grad_sync")
    assert flight >= 0.9 * wait - 1.0, (flight, wait)
    if not hidden:
        assert flight <= 1.1 * wait + 1.0, (flight, wait)


def test_a_plain_mlp_shows_forward_backward_optimizer_and_checkpoints(tmp_path):
    agents = run_plain(tmp_path, str(EXAMPLES / "mlp_plain.py"), "--steps", "30",
                       "--checkpoint-every", "10", "--batch", "16", "--dim", "48")  # fmt: skip
    (a,) = agents
    for s in a.steps[2:]:
        assert {"data_wait", "forward", "backward", "optimizer"} <= set(s.phases), s
        assert "grad_sync" not in s.phases
        assert s.inputs == 16 * 48, s  # the batch the forward was given, through the hooks'
        # discovery and then the class-level wrapper alike
    saves = [s.step for s in a.steps if "checkpoint" in s.phases]
    assert len(saves) == 2, saves  # steps 10 and 20 (the 30th ends the script first)


def test_ddp_under_torchrun_gives_each_rank_its_sync_wait(tmp_path):
    agents = run_plain(tmp_path, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                       str(EXAMPLES / "ddp_plain.py"), "--steps", "30", "--slow-rank", "1",
                       "--slow-ms", str(SLOW_MS), "--checkpoint-every", "10")  # fmt: skip
    check_ranks(agents, slow=1)
    assert any("checkpoint" in s.phases for s in agents[0].steps)  # rank 0 saves


def test_ddp_under_mp_spawn_reports_ranks_from_the_process_group(tmp_path):
    port = str(free_port())
    spawn = (str(EXAMPLES / "ddp_plain.py"), "--spawn", "2", "--steps", "30", "--port", port)
    agents = run_plain(tmp_path, *spawn, "--slow-rank", "0", "--slow-ms", str(SLOW_MS))
    check_ranks(agents, slow=0)  # no RANK variable: the rank came from torch.distributed
    check_in_flight(agents, slow=0, hidden=True)
    for a in agents:  # DDP's buckets, all-reduced from the autograd thread, are the payload
        assert {s.comm_bytes for s in a.steps[3:]} == {GRAD_BYTES}, a.steps[-1]
    for a in agents:  # the setup, read from the live DDP object (issue 38)
        assert parallel(a) == {
            "kind": "DDP", "bucket_cap_mb": 25.0, "gradient_as_bucket_view": False,
            "static_graph": False, "find_unused_parameters": False, "broadcast_buffers": True,
        }, a.fingerprint  # fmt: skip


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hand_written_all_reduce_loop_is_grad_sync(tmp_path, mode):
    extra = (("--async-op",) if mode == "async" else ()) + ("--port", str(free_port()))
    agents = run_plain(tmp_path, str(EXAMPLES / "ddp_plain.py"), "--spawn", "2", "--allreduce",
                       "--steps", "30", "--slow-rank", "1", "--slow-ms", str(SLOW_MS),
                       *extra)  # fmt: skip
    check_ranks(agents, slow=1)
    check_in_flight(agents, slow=1, hidden=mode == "async")  # a blocking call hides nothing
    for a in agents:  # a process group and no wrapper: the loop's own collectives
        assert parallel(a) == {"kind": "collectives"}, a.fingerprint
        assert {s.comm_bytes for s in a.steps[3:]} == {GRAD_BYTES}, a.steps[-1]


USER_HOOK = """
import os, torch, torch.distributed as dist
from torch import nn
import gputop.agent as gt
gt.init(server=False)
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"])
dist.init_process_group("gloo", rank=0, world_size=1)
calls = []
def mine(state, bucket):
    calls.append(state)
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer() * 0)  # visibly the user's: every gradient zero
    return fut
m = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
when = os.environ["WHEN"]
if when == "before":
    m.register_comm_hook("my state", mine)
for i in range(3):
    if when == "after" and i == 1:  # gputop's hook is already in place: the user's wins
        m.register_comm_hook("my state", mine)
    m(torch.randn(3, 4)).sum().backward()
assert calls and set(calls) == {"my state"}, calls
assert all(float(p.grad.abs().sum()) == 0 for p in m.parameters())
assert m._comm_hooks == [(mine, "my state")]
try:
    m.register_comm_hook(None, mine)
except RuntimeError as e:
    print("second:", "only be called once" in str(e))
r = gt._rec
print("sync", r.auto["grad_sync"].depth, r.errors)
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_the_users_comm_hook_wins_before_or_after_gputops(when):
    env = {**os.environ, "WHEN": when, "PORT": str(free_port()),
           "GPUTOP_NO_SERVER": "1", "PYTHONWARNINGS": "ignore"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", USER_HOOK], capture_output=True, text=True,
                         env=env, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-5:] == ["second:", "True", "sync", "0", "0"], out.stdout


LATE = """
import os, tempfile, threading, torch
import torch.distributed.checkpoint as dcp
from torch import nn
os.environ["GPUTOP_NO_SERVER"] = "1"
net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
def attach():  # what an attacher does, from a thread that is not the training thread
    import gputop.agent
    gputop.agent.autostart()
for i in range(12):
    if i == 3:
        t = threading.Thread(target=attach)
        t.start()
        t.join()
    loss = net(torch.randn(4, 8)).sum()
    loss.backward()
    opt.step()
    if i == 8:
        with tempfile.TemporaryDirectory() as d:
            dcp.save({"w": net[0].weight.detach()}, checkpoint_id=d)
import gputop.agent as gt
r = gt._rec
for rec in r.records:
    print(sorted(r.names[i] for i, d in enumerate(rec[4]) if d))
print("errors", r.errors)
"""


def test_an_agent_loaded_into_a_running_loop_from_another_thread_finds_every_phase():
    out = subprocess.run([sys.executable, "-c", LATE], capture_output=True, text=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[-1] == "errors 0"
    steps = [ast.literal_eval(line) for line in lines[:-1]]
    # the first step after attaching: the backward that installed the rest, then everything
    assert "forward" in steps[-1] and "backward" in steps[-1] and "optimizer" in steps[-1]
    assert any("checkpoint" in s for s in steps), steps


LATER_DDP = """
import os, torch, torch.distributed as dist
from torch import nn
import gputop.agent as gt
gt.init(server=False)
from gputop.agent import auto
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"])
dist.init_process_group("gloo", rank=0, world_size=1)
def train(m, steps):
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(steps):
        m(torch.randn(3, 4)).sum().backward()
        opt.step()
train(nn.parallel.DistributedDataParallel(nn.Linear(4, 2)), auto.DISCOVER_STEPS + 2)
assert not auto._FORWARD[0].handles  # the global hooks are off: DDP's class forward is timed
second = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
train(second, 2)
print(second.__dict__["_gputop_sync"].registered, gt._rec.errors)
"""


def test_a_ddp_model_made_after_the_roots_were_found_still_gets_the_sync_hook():
    env = {**os.environ, "PORT": str(free_port()), "GPUTOP_NO_SERVER": "1",
           "PYTHONWARNINGS": "ignore"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", LATER_DDP], capture_output=True, text=True,
                         env=env, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-2:] == ["True", "0"], out.stdout


def test_a_rank_that_waits_for_a_stuck_peer_inside_backward_is_in_grad_sync(tmp_path):
    env = job_env({**os.environ, "GPUTOP_DIR": str(tmp_path), "PYTHONWARNINGS": "ignore"})
    argv = [sys.executable, str(EXAMPLES / "ddp_plain.py"), "--spawn", "2", "--steps", "1000",
            "--stall-rank", "1", "--stall-after", "5", "--port", str(free_port())]  # fmt: skip
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)  # fmt: skip
    link = AgentLink(p.pid, directories=lambda: [tmp_path])

    def waiting_rank_0():
        a = {a.rank: a for a in link.sample().agents}.get(0)
        if a is not None and a.open_phase == "grad_sync" and (a.open_age_s or 0) > 1:
            return a
        return None

    try:
        beat = until(waiting_rank_0, timeout=90, what="rank 0 open in grad_sync for over 1 s",
                     every=0.2)  # fmt: skip
        assert len(beat.steps) == 5 and p.poll() is None  # stuck at step 5, still waiting
    finally:
        link.close()
        os.killpg(p.pid, 9)
        p.wait(30)
