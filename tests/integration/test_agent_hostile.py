"""The agent socket against other local users and hostile clients (issue 17 items 2 and 3), with
real trainer processes: a socket the target does not serve is never believed, a directory
another user took first is left for a private one the monitor still finds, and clients cannot
make the trainer hold more fds or threads, or exit later."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from tests_support import as_nobody, until, until_or_none

from gputop.agent.paths import socket_path
from gputop.agent.server import MAX_CLIENTS
from gputop.sources.agent_link import AgentLink

TRAINER = r"""
import os, sys, time
import gputop.agent as gt
gt.init(torch_hooks=False)
stop = sys.argv[1]
while not os.path.exists(stop):
    with gt.FORWARD:
        time.sleep(0.002)
    gt.step(samples=8)
print("done", time.time(), flush=True)
"""

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to act as a second user (nobody)"
)


class Trainer:
    """A loop with the agent, serving where GPUTOP_DIR says (or where it has to)."""

    def __init__(self, agent_dir: Path, work: Path) -> None:
        self.stop_file = work / "stop"
        self.p = subprocess.Popen(
            [sys.executable, "-c", TRAINER, str(self.stop_file)],
            env={**os.environ, "GPUTOP_DIR": str(agent_dir), "PYTHONWARNINGS": "ignore"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.pid = self.p.pid

    def finish(self) -> tuple[float, str, str]:
        """(seconds from the loop's end to the process's end, stdout, stderr)."""
        self.stop_file.touch()
        out, err = self.p.communicate(timeout=120)
        end = time.time()
        done = [float(x.split()[1]) for x in out.splitlines() if x.startswith("done")]
        return (end - done[0] if done else float("inf")), out, err

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.communicate(timeout=30)

    def proc(self, key: str) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        raise KeyError(key)

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))


@pytest.fixture
def trainers(tmp_path):
    started: list[Trainer] = []

    def start(agent_dir: Path) -> Trainer:
        t = Trainer(agent_dir, tmp_path)
        started.append(t)
        return t

    yield start
    for t in started:
        t.kill()


def read_until(link: AgentLink, check, timeout: float = 60.0):
    """The link's first sample for which ``check(sample)``, sampled every 0.1 s."""
    return until(lambda: s if check(s := link.sample()) else None, timeout,
                 what="a sample of the link as awaited", every=0.1)  # fmt: skip


FAKE_STEPS = [{"seq": i, "step": i, "t0_ns": i * 10**6, "dur_ns": 10**6,
               "phases": {"spoofed": 10**6}} for i in range(50)]  # fmt: skip


def fake_agent(path: Path, pid: int, accepted: list[int] | None = None) -> socket.socket:
    """A listener at ``path`` that answers like ``pid``'s agent with made-up steps."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    hello = {"v": 1, "type": "hello", "agent": {"pid": pid, "argv": ["fake"]}, "wire": 1,
             "phases": ["spoofed"]}  # fmt: skip
    lies = (json.dumps(hello) + "\n" + json.dumps({"v": 1, "type": "steps", "steps": FAKE_STEPS})
            + "\n").encode()  # fmt: skip

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            if accepted is not None:
                accepted.append(1)
            with contextlib.suppress(OSError):
                conn.sendall(lies)

    threading.Thread(target=serve, daemon=True).start()
    return listener


def test_a_socket_served_by_another_process_is_not_believed(tmp_path):
    """A socket named for the target, in a private directory, served by someone else: the
    kernel's credentials of the server say it is not the target, so nothing is read."""
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    d = tmp_path / "agents"
    d.mkdir(mode=0o700)
    path = socket_path(target.pid, d)
    accepted: list[int] = []
    listener = fake_agent(path, target.pid, accepted)
    link = AgentLink(target.pid, pids=lambda: [target.pid], directories=lambda: [d])
    samples = []
    try:
        for _ in range(6):
            samples.append(link.sample())
            time.sleep(0.1)  # pacing: six readings over 0.6 s, any of which might believe it
        until(lambda: accepted, timeout=10, what="the fake agent to accept the link")
    finally:
        link.close()
        listener.close()
        target.kill()
        target.wait()
    assert not any(a.steps for s in samples for a in s.agents)  # no made-up step believed
    assert not link.connected()
    (line,) = [p for s in samples for p in s.problems]  # said once, however many readings
    assert str(path) in line and f"served by pid {os.getpid()}" in line, line
    assert len(accepted) == 1  # and never tried again


def test_a_directory_open_to_others_is_left_and_the_trainer_says_where_it_serves(
    tmp_path, trainers
):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    t = trainers(shared)
    line = t.p.stderr.readline()
    m = re.match(r"gputop agent: .*open to other users.*serving at (\S+) instead$", line.strip())
    assert m, line
    served = Path(m[1])
    assert served.name == f"agent-{t.pid}.sock" and served.parent != shared
    st = os.lstat(served.parent)
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    link = AgentLink(t.pid, directories=lambda: [shared])  # looks where the trainer was told
    try:
        sample = read_until(link, lambda s: bool(s.agents) and len(s.agents[0].steps) > 5)
    finally:
        link.close()
    assert sample.agents[0].pid == t.pid and "forward" in sample.agents[0].steps[-1].phases
    assert not link.problems
    _, _, err = t.finish()
    assert t.p.returncode == 0 and "Traceback" not in err, err
    assert not served.parent.exists()  # the fallback directory goes with the process


@needs_root
def test_another_users_squatted_directory_and_fake_socket_are_not_believed(tmp_path, trainers):
    """nobody creates the trainer's runtime directory first and serves a fake agent there:
    the trainer serves from a private directory instead and says so, and the monitor ignores
    the fake (one line) and reads the real agent."""
    base = Path(tempfile.mkdtemp(prefix="gputop-squat-"))
    try:
        os.chmod(base, 0o1777)  # like /tmp: anyone may create a name in it
        squatted = base / "agents"
        assert as_nobody(lambda: os.mkdir(squatted, 0o700) or "made") == "made"
        t = trainers(squatted)
        line = t.p.stderr.readline().strip()
        nobody = pwd.getpwnam("nobody").pw_uid
        assert f"belongs to uid {nobody}" in line and "serving at" in line, line
        fake = socket_path(t.pid, squatted)
        child = _nobody_fake_agent(fake, t.pid)
        try:
            until(lambda: os.path.lexists(fake), what="the fake socket")
            link = AgentLink(t.pid, directories=lambda: [squatted])
            said: list[str] = []
            try:
                sample = read_until(
                    link,
                    lambda s: (
                        said.extend(s.problems) or (bool(s.agents) and len(s.agents[0].steps) > 5)
                    ),
                )
            finally:
                link.close()
        finally:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        agent = sample.agents[0]
        assert agent.argv != ("fake",) and "spoofed" not in agent.steps[-1].phases
        assert "forward" in agent.steps[-1].phases
        (problem,) = said
        assert str(fake) in problem and f"belongs to uid {nobody}" in problem, problem
        served = link._agents[t.pid].path
        assert served.parent != squatted and str(served) in line  # where it said it serves
        _, _, err = t.finish()
        assert t.p.returncode == 0 and "Traceback" not in err, err
        assert not served.parent.exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _nobody_fake_agent(path: Path, pid: int) -> int:
    """A forked child, become nobody, serving a fake agent at ``path`` until killed."""
    nobody = pwd.getpwnam("nobody")
    child = os.fork()
    if child == 0:
        try:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            fake_agent(path, pid)
            while True:
                time.sleep(1)  # pacing: the child idles, serving from its thread, until killed
        finally:
            os._exit(0)
    return child


def dial(path: Path) -> socket.socket | None:
    """A client connected to ``path``, or None when the agent left its listen queue full for
    10 s (the caller counts those)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)

    def connected() -> bool:
        try:
            s.connect(str(path))
            return True
        except BlockingIOError:  # the listen queue is full: wait for the agent to take some
            return False

    if until_or_none(connected, timeout=10, every=0.005):
        return s
    s.close()
    return None


def answered(s: socket.socket) -> bool:
    """The agent took this client: it sent its hello, or closed it (one over its cap). A peek:
    what was sent stays for the client to read."""
    try:
        s.recv(1, socket.MSG_PEEK)  # bytes, or b"" at EOF: either way the agent answered
    except BlockingIOError:
        return False
    except OSError:  # reset: closed over the cap
        pass
    return True


def settled(t) -> bool:
    """Two looks a tenth of a second apart see the same fds and threads: the trainer's own
    start (its pools, its agent) is over."""
    before = (t.fds(), t.proc("Threads"))
    time.sleep(0.1)  # pacing: the span between the two looks
    return (t.fds(), t.proc("Threads")) == before


def test_hundreds_of_idle_clients_add_no_fds_threads_or_memory_to_the_trainer(tmp_path, trainers):
    """1000 idle clients took a trainer from 293 MiB to ~2 GiB and one fd each."""
    d = tmp_path / "agents"
    t = trainers(d)
    until(lambda: socket_path(t.pid, d).exists(), what="the agent's socket")
    until(lambda: settled(t), what="the trainer's fds and threads to settle")
    fds, threads, rss = t.fds(), t.proc("Threads"), t.proc("VmRSS")
    socks = [s for s in (dial(socket_path(t.pid, d)) for _ in range(300)) if s is not None]
    until(lambda: all(answered(s) for s in socks), what="the agent to take every client")
    try:
        assert len(socks) == 300  # each was accepted (the late ones to be closed at once)
        assert t.fds() <= fds + MAX_CLIENTS
        assert t.proc("Threads") == threads
        assert t.proc("VmRSS") - rss < 64 << 10  # KiB: what MAX_CLIENTS backlogs can hold
    finally:
        for s in socks:
            s.close()


def test_exit_is_not_held_up_by_clients_that_do_not_read(tmp_path, trainers):
    """40 idle clients delayed exit by 20 s (0.5 s of blocking send each)."""
    d = tmp_path / "agents"
    t = trainers(d)
    until(lambda: socket_path(t.pid, d).exists(), what="the agent's socket")
    time.sleep(3.0)  # pacing: a backlog of steps worth more than a socket buffer
    socks = [s for s in (dial(socket_path(t.pid, d)) for _ in range(40)) if s is not None]
    until(lambda: all(answered(s) for s in socks), what="the agent to take every client")
    try:
        exit_s, _, err = t.finish()
    finally:
        for s in socks:
            s.close()
    assert t.p.returncode == 0, err
    assert exit_s < 5.0, exit_s


@needs_root
def test_a_process_of_the_job_serving_as_another_user_is_not_believed(tmp_path):
    """A process in the target's tree that runs as nobody serves a socket named for the target
    in a directory that passes the owner check: its uid gives it away."""
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    base = Path(tempfile.mkdtemp(prefix="gputop-uid-"))
    d = base / "agents"
    try:
        os.chmod(base, 0o1777)
        assert as_nobody(lambda: os.mkdir(d, 0o700) or "made") == "made"
        path = socket_path(target.pid, d)
        child = _nobody_fake_agent(path, target.pid)
        try:
            until(lambda: os.path.lexists(path), what="the fake socket")
            os.chown(d, 0, 0)  # the directory now looks like the target's (root's)
            link = AgentLink(target.pid, pids=lambda: [target.pid, child], directories=lambda: [d])
            said = []
            for _ in range(5):
                sample = link.sample()
                said += sample.problems
                assert not any(a.steps for a in sample.agents)
                time.sleep(0.1)  # pacing: five readings over 0.5 s, none may believe it
            link.close()
        finally:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        nobody = pwd.getpwnam("nobody").pw_uid
        (line,) = said
        assert f"served as uid {nobody}, not as uid 0" in line, line
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(base, ignore_errors=True)


def test_loading_the_agent_is_not_skipped_for_a_socket_someone_else_serves(tmp_path):
    """The attach plan's "already has an agent" asks the same questions as the monitor: a
    listener under the target's name that the target does not serve is not its agent."""
    from gputop.inject.target import read_process

    d = tmp_path / "agents"
    d.mkdir(mode=0o700)
    env = {**os.environ, "GPUTOP_DIR": str(d)}
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)
    listener = fake_agent(socket_path(target.pid, d), target.pid)
    try:
        until(lambda: read_process(target.pid) is not None and
              read_process(target.pid).environ.get("GPUTOP_DIR") == str(d))  # fmt: skip
        info = read_process(target.pid)
        assert info is not None and not info.has_agent()
    finally:
        listener.close()
        target.kill()
        target.wait()


def test_an_agent_serving_from_its_fallback_directory_counts_as_loaded(tmp_path, trainers):
    from gputop.inject.target import read_process

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)  # open to others: the trainer serves from a private one instead
    t = trainers(shared)
    assert "instead" in t.p.stderr.readline()
    info = read_process(t.pid)
    assert info is not None and info.has_agent()  # found through the kernel's socket list
