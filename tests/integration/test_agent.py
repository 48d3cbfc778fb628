"""The agent and its socket with real trainer processes (torch on the CPU)."""

from __future__ import annotations

import ast
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests_support import as_nobody, until  # noqa: E402

from gputop.agent.paths import socket_path  # noqa: E402
from gputop.agent.recorder import StepRecorder  # noqa: E402
from gputop.agent.server import AgentServer  # noqa: E402
from gputop.sources.agent_link import READ_BUDGET, AgentLink  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def trainer(script: str, *args: str, agent_dir: Path, **kw) -> subprocess.Popen:
    env = {**os.environ, "GPUTOP_DIR": str(agent_dir), "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / script), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def wait_for_socket(pid: int, agent_dir: Path, timeout: float = 60) -> None:
    until(lambda: socket_path(pid, agent_dir).exists(), timeout, what="the agent's socket")


def link_for(pid: int, agent_dir: Path) -> AgentLink:
    return AgentLink(pid, directories=lambda: [agent_dir])


def collect(link: AgentLink, done, timeout: float = 60):
    """The first agent's state once ``done(state)``, the link sampled every 0.1 s."""

    def first_done():
        agents = link.sample().agents
        return agents[0] if agents and done(agents[0]) else None

    return until(first_done, timeout, what="the agent's state to be as awaited", every=0.1)


@pytest.mark.alone
def test_slow_transform_shows_as_data_wait_of_the_transform_time(tmp_path):
    p = trainer("mlp_train.py", "--steps", "12", "--workers", "0", "--slow-transform-ms", "50",
                agent_dir=tmp_path)  # fmt: skip
    try:
        wait_for_socket(p.pid, tmp_path)
        a = collect(link_for(p.pid, tmp_path), lambda a: len(a.steps) >= 8)
    finally:
        p.wait(60)
    assert p.returncode == 0, p.stderr.read()
    for s in a.steps[1:]:
        assert s.phases["data_wait"] >= 50e6, s
        assert {"h2d", "forward", "backward", "optimizer"} <= set(s.phases)
        assert s.samples == 64
    assert a.fingerprint["dataloader"]["num_workers"] == 0
    assert a.fingerprint["intra_op_threads"] >= 1


def test_monitor_absent_late_killed_and_restarted_leaves_training_alone(tmp_path):
    p = trainer("mlp_train.py", "--steps", "100000", "--seconds", "7", "--slow-transform-ms", "10",
                agent_dir=tmp_path)  # fmt: skip
    try:
        wait_for_socket(p.pid, tmp_path)
        time.sleep(1.5)  # pacing: steps made with no monitor at all
        first = link_for(p.pid, tmp_path)
        a = collect(first, lambda a: len(a.steps) > 20)  # attached late: history arrives
        assert a.steps[0].step == 0 and a.state == "connected"
        for agent in first._agents.values():  # a monitor that dies abruptly
            agent.sock.close()
        time.sleep(1.0)  # pacing: a second with no monitor before the next comes
        second = link_for(p.pid, tmp_path)
        b = collect(second, lambda b: bool(b.steps) and b.steps[-1].step > a.steps[-1].step + 20)
    finally:
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "Traceback" not in err
    steps = b.steps
    # nothing lost or stalled while monitors came and went: every step is there, and none
    # waited on a monitor (a send blocked on a dead one would hold a ~20-ms step for seconds;
    # a busy machine stretches steps by a few times, not to a second). The steps' own speed is
    # the load's, not the agent's: the agent's cost is benchmarked (bench_agent_hostile.py)
    assert [s.step for s in steps] == list(range(steps[0].step, steps[-1].step + 1))
    slow = [(s.step, s.dur_ns // 10**6) for s in steps if s.step > 1 and s.dur_ns >= 1e9]
    assert not slow, slow  # steps 0 and 1 include torch's first-call setup


def gputop_run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputop", "run", "--no-tui", "--", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def test_gputop_run_sees_phases_of_a_plain_script(tmp_path):
    r = gputop_run(sys.executable, str(EXAMPLES / "mlp_plain.py"), "--steps", "25",
                   "--slow-transform-ms", "20")  # fmt: skip
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("gputop: pid")]
    assert "data_wait" in line and "optimizer" in line
    assert re.search(r"\b2[0-9] steps\b", line)


def test_gputop_run_exits_with_the_childs_code():
    r = gputop_run(sys.executable, "-c", "raise SystemExit(7)")
    assert r.returncode == 7


def test_gputop_run_with_a_missing_command():
    r = gputop_run("definitely-not-a-command-xyz")
    assert r.returncode == 127 and "command not found" in r.stderr


def test_two_gloo_ranks_under_torchrun_show_the_slow_rank():
    r = gputop_run(
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(EXAMPLES / "ddp_train.py"), "--slow-rank", "1", "--steps", "25", "--slow-ms", "30",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    work = {}
    for line in r.stdout.splitlines():
        m = re.match(
            r"gputop: rank (\d): \d+ steps, median [\d.]+ ms (?:over the last \d+ )?"
            r"\(work ([\d.]+) ms",
            line,
        )
        if m:
            work[int(m[1])] = float(m[2])
    assert set(work) == {0, 1}, r.stdout
    assert work[1] > work[0] + 20  # rank 1 works 30 ms longer; rank 0 waits in grad_sync


@pytest.fixture
def server():
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="gputop-test-"))
    os.chmod(base, 0o711)  # traversable by others, so only the agent's own checks protect it
    rec = StepRecorder()
    srv = AgentServer(rec, directory=base / "agents")
    assert srv.start()
    for _ in range(3):
        rec.step()
    yield srv
    srv.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
def test_a_peer_of_another_user_is_refused(server):
    path = str(server.path)

    def connect() -> str:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        try:
            s.connect(path)
        except PermissionError:
            return "denied"
        return "served" if s.recv(100) else "closed"

    assert as_nobody(connect) == "denied"
    # even past the file permissions, the kernel credentials say no
    os.chmod(server.directory, 0o711)
    os.chmod(path, 0o666)
    assert as_nobody(connect) == "closed"
    assert server.refused == 1
    mine = socket.socket(socket.AF_UNIX)
    mine.connect(path)
    assert b'"type":"hello"' in mine.recv(65536)  # the same user is served


def test_a_flood_of_garbage_costs_a_bounded_read_and_is_dropped(tmp_path):
    d = tmp_path / "agents"
    d.mkdir(mode=0o700)
    fake_pid = os.getpid()
    path = socket_path(fake_pid, d)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)
    stop, sent = threading.Event(), threading.Event()

    def flood() -> None:
        conn, _ = listener.accept()
        junk = (b"\x00garbage{not json}\n" * 1000) + b'{"v":1,"type":"steps","steps":7}\n'
        try:
            while not stop.is_set():
                conn.sendall(junk)
                sent.set()
        except OSError:
            pass

    t = threading.Thread(target=flood, daemon=True)
    t.start()
    link = AgentLink(fake_pid, pids=lambda: [fake_pid], directories=lambda: [d])
    try:
        link.sample()
        until(sent.is_set, timeout=10, what="the flooder's first 1000 garbage lines sent")
        states = []
        for _ in range(5):
            states.append(link.sample().agents[0])
        a = link._agents[fake_pid]
        assert len(a.buf) <= READ_BUDGET  # never more than the budget per tick
        assert states[-1].dropped > 50 and not states[-1].steps
        assert states[-1].state == "reconnecting"  # the flooder was disconnected, backing off
    finally:
        stop.set()
        link.close()
        listener.close()


FLOPS_SCRIPT = """
import torch, gputop.agent as gt
gt.init(server=False, measure_flops_at=2, auto_step=False)
net = torch.nn.Linear(100, 50)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for i in range(5):
    loss = net(torch.randn(32, 100)).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    gt.step(samples=32)
print([r[7] for r in gt._rec.records])
"""


def test_flops_are_measured_once_on_a_chosen_step():
    out = subprocess.run(
        [sys.executable, "-c", FLOPS_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    flops = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    assert flops[:3] == [None, None, None]  # before and during the measured step
    # forward 2*32*100*50, and the weight gradient as much again
    assert flops[3] == flops[4] == 2 * 2 * 32 * 100 * 50


AUTOCAST_SCRIPT = """
import contextlib, torch, gputop.agent as gt
from gputop.agent import torch_hooks as th
gt.init(server=False, auto_step=False)
gt._rec.on_step.append(th.note_autocast)  # what init() adds with a server
net = torch.nn.Linear(8, 4)
def run(steps, dtype=None):
    for _ in range(steps):
        amp = torch.autocast("cpu", dtype=dtype) if dtype else contextlib.nullcontext()
        with amp:  # around the forward only, as usual: off at every step boundary
            loss = net(torch.randn(2, 8, dtype=next(net.parameters()).dtype)).float().sum()
        loss.backward()
        gt.step()
    fp = th.fingerprint()
    print(fp["autocast"], fp["autocast_dtype"], fp["param_dtype"],
          fp["float32_matmul_precision"], len(th._probe))
run(3)
run(64, torch.bfloat16)
th._AUTOCAST.clear()
net.to(torch.bfloat16)
run(64)
"""


def test_autocast_and_its_dtype_are_seen_inside_the_forward():
    out = subprocess.run(
        [sys.executable, "-c", AUTOCAST_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-3:] == [
        "False None float32 highest 0",  # no autocast; the one-shot hook removed itself
        "True bfloat16 float32 highest 0",  # autocast on in the forward only, still seen
        "False None bfloat16 highest 0",  # bf16 weights without autocast
    ], out.stderr


FORK_SCRIPT = """
import os, gputop.agent as gt
gt.init(server=False)
with gt.FORWARD:
    pass
gt.step()
pid = os.fork()
if pid == 0:  # like a DataLoader worker
    with gt.FORWARD:
        pass
    gt.step()
    os._exit(0 if not gt.enabled() and not gt._rec.records else 1)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status), "parent", gt.enabled(), len(gt._rec.records))
"""


def test_the_agent_turns_itself_off_in_forked_children():
    out = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.stdout.split() == ["child", "0", "parent", "True", "1"], out.stderr


def test_an_attached_agent_idles_when_its_last_monitor_leaves(tmp_path):
    d = tmp_path / "agents"
    rec = StepRecorder()
    srv = AgentServer(rec, directory=d, idle_alone=True)
    assert srv.start()
    try:

        def monitor() -> socket.socket:
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(srv.path))
            assert b'"type":"hello"' in s.recv(65536)
            return s

        first, second = monitor(), monitor()
        first.close()
        until(lambda: len(srv._clients) == 1)  # the server has seen the first one go
        assert rec.on, "one monitor is still reading"
        second.close()
        until(lambda: not rec.on)  # the last one left: idle
        again = monitor()
        until(lambda: rec.on)  # a monitor is back: recording
        again.close()
    finally:
        srv.stop()
