"""Capture requests reach the agent from a socket: nothing in them is trusted. And replies
reach the monitor from an agent: file names must stay inside the capture folder."""

from __future__ import annotations

import os

import pytest

from gputop.agent.trace import Request, TraceCapture, _check
from gputop.sources.agent_decode import parse_reply


@pytest.fixture
def private(tmp_path):
    d = tmp_path / "cap"
    d.mkdir(mode=0o700)
    return str(d)


def ask(folder: str, **kw) -> dict:
    return {"id": "r1", "kind": "torch-trace", "steps": 3, "dir": folder, "max_bytes": 10**6, **kw}


def test_a_good_request_is_accepted(private):
    req = _check(ask(private, options={"with_stack": True, "record_shapes": "yes"}))
    assert isinstance(req, Request)
    assert req.with_stack and not req.record_shapes  # only a real true counts


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"steps": 0}, "steps must be 1 to 20"),
        ({"steps": 21}, "steps must be 1 to 20"),
        ({"steps": True}, "steps must be 1 to 20"),
        ({"steps": "3"}, "steps must be 1 to 20"),
        ({"max_bytes": -1}, "max_bytes must be a positive integer"),
        ({"kind": "core-dump"}, "unknown capture kind"),
        ({"id": ""}, "a request needs an id"),
        ({"id": "x" * 65}, "a request needs an id"),
        ({"dir": "relative/path"}, "the folder must be an absolute path"),
        ({"dir": "/nonexistent/gputop"}, "cannot use the folder"),
    ],
)
def test_bad_requests_are_refused_with_the_reason(private, change, why):
    assert _check(ask(private, **change)).startswith(why)


def test_a_folder_others_can_read_or_a_symlink_is_refused(private, tmp_path):
    os.chmod(private, 0o755)
    assert "private directory" in _check(ask(private))
    os.chmod(private, 0o700)
    link = tmp_path / "link"
    link.symlink_to(private)
    assert "private directory" in _check(ask(str(link)))


def test_one_capture_at_a_time(private):
    pytest.importorskip("torch")  # the agent refuses without torch imported
    t = TraceCapture()

    assert t.request(ask(private)) is None
    assert t.request(ask(private, id="r2")) == "a capture is already running in this process"


def test_a_memory_snapshot_without_cuda_reports_failure_at_the_next_step(private):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    t = TraceCapture(rank=0)
    assert t.request(ask(private, kind="memory-snapshot")) is None
    t(5)  # the step boundary, on the training thread
    (result,) = t.take_results()
    assert result["status"] == "failed" and result["message"] == "no CUDA device in the target"
    assert t.request(ask(private, id="r2", kind="memory-snapshot")) is None  # free again


def test_replies_keep_file_names_inside_the_folder():
    reply = parse_reply({"type": "capture_done", "id": "r1", "status": "ok",
                         "files": ["rank0.pt.trace.json.gz", "../../etc/passwd", "/abs", "..", 7],
                         "steps": [3, 5], "torch": "2.13.0", "python": 3})  # fmt: skip
    assert reply["files"] == ["rank0.pt.trace.json.gz"]
    assert reply["steps"] == (3, 5) and reply["python"] is None
    assert parse_reply({"type": "capture_done", "id": "r1", "status": "pwned"}) is None
    assert parse_reply({"type": "ack", "id": 5, "ok": True}) is None
    assert parse_reply({"type": "ack", "id": "r1", "ok": 1})["ok"] is False  # only a real true
