"""Nothing an agent sends is lost on its way into a recording (issue 17, item 8): GPU times that
reach a step in two messages are both recorded, and a reading carries every step that arrived
since the one before, however many (600 steps/s read once a second lost one in six at a
fixed 512). The agent is a real Unix socket speaking the wire format; the recording is a real
file read back by the reader and the report."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import device

from gputop.agent.paths import socket_path
from gputop.agent.wire import encode
from gputop.model.steps import AgentsSample, new_steps
from gputop.record.reader import open_recording
from gputop.record.report import build_report
from gputop.record.writer import Recorder
from gputop.sources.agent_link import STEP_HISTORY, AgentLink

PID = os.getpid()  # the agent is this process: whatever credentials the link checks hold
MS = 1_000_000


class FakeAgent:
    """A listening agent socket that sends what the test says, when it says."""

    def __init__(self, folder: Path) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(socket_path(PID, folder)))
        self.listener.listen(1)
        self.conn: socket.socket | None = None

    def accept(self) -> None:
        self.listener.settimeout(10)
        self.conn, _ = self.listener.accept()
        self.conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        self.send(encode("hello", agent={"pid": PID, "argv": ["python", "t.py"], "rank": 0,
                                         "local_rank": 0, "world_size": 1}))  # fmt: skip

    def send(self, data: bytes) -> None:
        assert self.conn is not None
        self.conn.sendall(data)

    def steps(self, first: int, n: int) -> None:
        """``n`` finished steps of 2 ms, 100 to a message as the agent sends them."""
        for lo in range(first, first + n, 100):
            items = [
                {"step": i, "t0_ns": 10**15 + i * 2 * MS, "dur_ns": 2 * MS,
                 "phases": {"forward": MS, "backward": MS}}
                for i in range(lo, min(first + n, lo + 100))
            ]  # fmt: skip
            self.send(encode("steps", steps=items))

    def gpu(self, step: int, phase: str, ns: int) -> None:
        self.send(encode("gpu", phases=[{"step": step, "phase": phase, "gpu_ns": ns}]))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.listener.close()


@pytest.fixture
def agent(tmp_path) -> Iterator[tuple[FakeAgent, AgentLink]]:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    fake = FakeAgent(folder)
    link = AgentLink(PID, pids=lambda: [PID], directories=lambda: [folder])
    link.sample()  # finds and connects
    fake.accept()
    yield fake, link
    link.close()
    fake.close()


def _reading(link: AgentLink, want_step: int) -> AgentsSample:
    """The next reading once the agent's last message is in (a real socket: it may take a
    few reads on a busy machine, but never loses what it already read)."""
    for _ in range(200):
        sample = link.sample()
        steps = sample.agents[0].steps if sample.agents else ()
        if steps and steps[-1].step >= want_step:
            return sample
        os.sched_yield()
    raise AssertionError(f"step {want_step} never arrived")


def _record(tmp_path: Path, readings: list[AgentsSample]) -> Path:
    path = tmp_path / "steps.gputop"
    clock = [100.0]
    rec = Recorder(path, clock=lambda: clock[0])
    rec.start((device(0),), {"mode": "record", "pid": PID})
    for r in readings:
        clock[0] += 1.5
        rec.agents(r)
    rec.close()
    return path


def test_gpu_times_that_reach_a_step_in_two_messages_are_both_recorded(agent, tmp_path):
    fake, link = agent
    fake.steps(0, 3)
    fake.gpu(2, "forward", 7 * MS)
    first = _reading(link, 2)
    assert dict(first.agents[0].steps[-1].gpu) == {"forward": 7 * MS}
    fake.gpu(2, "backward", 9 * MS)  # resolved a tick later
    fake.steps(3, 1)
    second = _reading(link, 3)
    # the earlier reading keeps what it was given; the later one has both
    assert dict(first.agents[0].steps[-1].gpu) == {"forward": 7 * MS}
    assert dict(second.agents[0].steps[2].gpu) == {"forward": 7 * MS, "backward": 9 * MS}

    recording = open_recording(_record(tmp_path, [first, second]))
    agents = [r.value for r in recording.records() if r.kind == "agents"]
    assert recording.damage is None and len(agents) == 2
    assert dict(agents[0].agents[0].steps[2].gpu) == {"forward": 7 * MS}
    assert dict(agents[1].agents[0].steps[2].gpu) == {"forward": 7 * MS, "backward": 9 * MS}


def test_every_step_between_two_readings_is_in_the_reading_and_the_recording(agent, tmp_path):
    fake, link = agent
    burst = 3 * STEP_HISTORY  # 1536 steps in the second between two readings
    fake.steps(0, burst)
    for i in range(burst):
        fake.gpu(i, "forward", MS + i)
    first = _reading(link, burst - 1)
    fake.steps(burst, 10)
    second = _reading(link, burst + 9)

    counted, cursor = [], None
    for r in (first, second):
        fresh, cursor = new_steps(r.agents[0].steps, cursor)
        counted += [s.step for s in fresh]
    assert counted == list(range(burst + 10))
    assert all(s.gpu == {"forward": MS + s.step} for s in first.agents[0].steps)
    assert len(second.agents[0].steps) == STEP_HISTORY + 10  # then only the recent ones stay

    path = _record(tmp_path, [first, second])
    recording = open_recording(path)
    recorded = [r.value.agents[0].steps for r in recording.records() if r.kind == "agents"]
    assert [s.step for s in recorded[0]] == list(range(burst))
    assert recorded[1] == second.agents[0].steps
    ranks = build_report(recording)["ranks"]
    assert [r["steps"] for r in ranks] == [burst + 10]
