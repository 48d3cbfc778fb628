"""The pure and local parts of captures: the flame graph renderer, the manifest, the folder,
bounds, and running a tool with a timeout and a cancel."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from gputop import schemas
from gputop.capture import folder as fold
from gputop.capture.external import run_tool
from gputop.capture.flamegraph import merge, render
from gputop.capture.folder import CaptureError, FileEntry
from gputop.capture.manifest import CaptureTarget, Manifest, Tool, document, write
from gputop.capture.take import Bounds, checked

REPO = Path(__file__).resolve().parents[3]
SCHEMA = schemas.load("capture")

SPEEDSCOPE = {
    "shared": {"frames": [{"name": "main", "file": "/x/train.py", "line": 10},
                          {"name": "Module._call_impl", "file": "/t/module.py", "line": 5},
                          {"name": "Queue.get", "file": "/py/queue.py", "line": 3}]},
    "profiles": [
        {"type": "sampled", "name": 'Process 1 Thread 1 "MainThread"',
         "samples": [[0, 1], [0, 1], [0, 2]], "weights": [0.02, 0.02, 0.02]},
        {"type": "sampled", "name": 'Process 2 Thread 2 "MainThread"',
         "samples": [[2], [7], "junk"], "weights": [0.02, 0.02, 0.02]},
        {"type": "evented", "name": "ignored"},
        "not a profile",
    ],
}  # fmt: skip


def test_every_thread_of_every_process_merges_under_one_root():
    root = merge(SPEEDSCOPE)
    assert root.weight == pytest.approx(0.10)  # 3 + 2 usable samples (junk skipped)
    main = root.children['Process 1 Thread 1 "MainThread"']
    assert main.children["main (train.py:10)"].children[
        "Module._call_impl (module.py:5)"
    ].weight == (pytest.approx(0.04))
    worker = root.children['Process 2 Thread 2 "MainThread"']
    assert worker.weight == pytest.approx(0.04)  # the out-of-range frame index counts, unnamed
    assert set(worker.children) == {"Queue.get (queue.py:3)"}


def test_the_svg_is_well_formed_and_escapes_names():
    frames = [{"name": "<lambda> & co", "file": "a.py", "line": 1}]
    profile = {"type": "sampled", "name": "p", "samples": [[0]], "weights": [1]}
    doc = {"shared": {"frames": frames}, "profiles": [profile]}
    svg = render(merge(doc), "pid 1 <all>")
    import xml.dom.minidom

    xml.dom.minidom.parseString(svg)  # raises on bad markup
    assert "&lt;lambda&gt; &amp; co" in svg
    assert "no samples" in render(merge({}))


def test_bounds_have_defaults_and_say_their_range():
    assert checked("pyspy-flame", Bounds()) == Bounds(10.0, 50, 200 * 2**20)
    assert checked("pyspy-dump", Bounds()).max_bytes == 50 * 2**20
    with pytest.raises(CaptureError, match="from 1 to 120"):
        checked("pyspy-flame", Bounds(seconds=600))
    with pytest.raises(CaptureError, match="from 1 to 200 samples/s"):
        checked("pyspy-flame", Bounds(rate=0))
    with pytest.raises(CaptureError, match="unknown capture kind"):
        checked("nsys-someday", Bounds())


def test_folders_are_private_named_by_time_kind_and_host(tmp_path):
    root = tmp_path / "caps"
    old = os.umask(0)
    try:
        a = fold.new_folder(root, "pyspy-dump", now=0.0, host="gpu box/1")
        b = fold.new_folder(root, "pyspy-dump", now=0.0, host="gpu box/1")
    finally:
        os.umask(old)
    assert a.name == "19700101T000000Z-pyspy-dump-gpu_box_1"
    assert b.name == a.name + "-1"
    b.close()
    for p in (root, a.path, b.path):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700
    with a:
        a.write("x.txt", b"hello")
        assert a.entry("x.txt").sha256.startswith("2cf24dba")
    assert stat.S_IMODE((a.path / "x.txt").stat().st_mode) == 0o600
    assert not (a.path / "x.txt.partial").exists()


def test_a_symlink_planted_for_a_file_is_not_followed(tmp_path):
    (tmp_path / "elsewhere").write_text("theirs")
    with fold.new_folder(tmp_path / "caps", "pyspy-dump") as f:
        os.symlink(tmp_path / "elsewhere", f.path / "x.txt.partial")
        with pytest.raises(OSError):
            f.write("x.txt", b"mine")
        os.symlink(tmp_path / "elsewhere", f.path / "y.txt")
        with pytest.raises(OSError):
            f.entry("y.txt")  # a link is not described as the capture's own file
    assert (tmp_path / "elsewhere").read_text() == "theirs"


def test_too_little_disk_is_refused_with_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(fold.shutil, "disk_usage", lambda p: type("U", (), {"free": 2**30})())
    with pytest.raises(CaptureError, match=r"only 1\.0 GiB free .*--dir on a bigger disk"):
        fold.check_free(tmp_path / "not-yet", 100 * 2**20)


def test_the_manifest_matches_its_schema_while_running_and_after(tmp_path):
    bounds = {"seconds": 10.0, "rate": 50, "max_bytes": 1}
    m = Manifest("20260101T000000Z-pyspy-flame-h", "pyspy-flame", bounds, requested_at=1.5)
    jsonschema.validate(document(m), SCHEMA)
    done = m.ended(
        "partial", "pid 1 exited during the capture",
        targets=(CaptureTarget(1, "main", 5, steps=(3, 9), status="partial"),),
        files=(FileEntry("flame.svg", 3, "0" * 64),),
        tool=Tool("py-spy", "py-spy 0.4.3", ("py-spy", "record"), "tail"),
    )  # fmt: skip
    with fold.new_folder(tmp_path / "caps", "pyspy-flame") as f:
        write(f, done)
    doc = json.loads((f.path / "manifest.json").read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["status"] == "partial" and doc["targets"][0]["steps"] == [3, 9]
    assert doc["requested_at"] == "1970-01-01T00:00:01.500Z"


def test_a_tool_is_stopped_at_its_timeout_and_on_cancel():
    started = time.monotonic()
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    r = run_tool(slow, timeout=0.5)
    assert r.timed_out and not r.cancelled and time.monotonic() - started < 10
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    r = run_tool(slow, timeout=30, cancel=cancel)
    assert r.cancelled
    assert run_tool(["/nonexistent/tool"], timeout=1).not_found
    r = run_tool(
        [sys.executable, "-c", "import sys; sys.stderr.write('x' * 5000); sys.exit(3)"], 10
    )
    assert r.returncode == 3 and len(r.stderr_tail) == 2000
