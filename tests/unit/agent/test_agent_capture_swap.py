"""The agent's side of issue 17 item 1: a capture request names a folder, and the trace is
written steps later. The folder is held from the check on, so renaming it and planting a link
in between sends nothing to the link's target."""

from __future__ import annotations

import gzip
import json
import os
import stat

import pytest

from gputop.agent.trace import Request, TraceCapture, _check


def test_a_folder_swapped_for_a_link_after_the_request_keeps_the_trace(tmp_path):
    torch = pytest.importorskip("torch")
    folder = tmp_path / "cap"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    t = TraceCapture(rank=0)
    ask = {"id": "r1", "kind": "torch-trace", "steps": 1, "dir": str(folder), "max_bytes": 10**8}
    assert t.request(ask) is None
    moved = tmp_path / "cap.moved"
    os.rename(folder, moved)  # between the request and the steps that write the trace
    os.symlink(victim, folder)
    x = torch.ones(64, 64)
    step = 0
    while not (results := t.take_results()) and step < 10:
        x = x @ x / 64  # a step's work
        step += 1
        t(step)  # the step boundary, on the training thread
    (result,) = results
    assert result["status"] == "ok", result["message"]
    assert os.listdir(victim) == []
    assert os.listdir(moved) == ["rank0.pt.trace.json.gz"]
    assert stat.S_IMODE((moved / "rank0.pt.trace.json.gz").stat().st_mode) == 0o600
    trace = json.loads(gzip.decompress((moved / "rank0.pt.trace.json.gz").read_bytes()))
    assert any(e.get("name", "").startswith("ProfilerStep#") for e in trace["traceEvents"])


def test_a_request_holds_its_folder_until_its_result(tmp_path):
    folder = tmp_path / "cap"
    folder.mkdir(mode=0o700)
    ask = {"id": "r1", "kind": "memory-snapshot", "steps": 1, "dir": str(folder),
           "max_bytes": 10**6}  # fmt: skip
    req = _check(ask)
    assert isinstance(req, Request) and os.path.samefile(f"/proc/self/fd/{req.dir_fd}", folder)
    fd = req.dir_fd
    req.release()
    assert req.dir_fd == -1
    with pytest.raises(OSError):
        os.fstat(fd)
