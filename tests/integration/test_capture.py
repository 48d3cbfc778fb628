"""py-spy captures of a real trainer through `gputop capture`: files, manifest, privacy, and
the endings a user meets (target exits mid-window, byte cap, no such process)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import xml.dom.minidom
from pathlib import Path

import jsonschema
import psutil
import pytest
from tests_support import as_nobody, kill_tree, trainer_with_workers, until

from gputop import schemas
from gputop.capture.take import take  # imported before as_nobody forks: nobody may not read it
from gputop.sources.agent_link import AgentLink
from gputop.sources.stacks import find_py_spy

REPO = Path(__file__).resolve().parents[2]
SCHEMA = schemas.load("capture")


@pytest.fixture
def trainer(request):
    """The plain trainer with two DataLoader workers, running once its workers exist."""
    job = trainer_with_workers("--seconds", str(getattr(request, "param", 30)))
    yield job
    kill_tree(job)


@pytest.fixture
def instrumented():
    """examples/mlp_train.py (it runs gputop's agent), once its socket is up."""
    from gputop.agent.paths import runtime_dir, socket_path

    job = subprocess.Popen(
        [sys.executable, str(REPO / "examples" / "mlp_train.py"), "--steps", "100000",
         "--seconds", "40", "--threads", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    until(lambda: socket_path(job.pid, runtime_dir()).exists(), timeout=60, what="its socket")
    link = AgentLink(job.pid)
    try:  # the first steps
        until(lambda: any(a.steps for a in link.sample().agents), timeout=60, what="its steps")
    finally:
        link.close()
    yield job
    kill_tree(job)


def capture(*args: str, root: Path, expect: int = 0) -> tuple[dict, Path]:
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "capture", *args, "--dir", str(root), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == expect, out.stderr
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, SCHEMA)
    folder = root / doc["id"]
    on_disk = json.loads((folder / "manifest.json").read_text())
    assert on_disk == doc
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for f in folder.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert not f.name.endswith(".partial")
    return doc, folder


class TestCapturesOfOneRunningTrainer:
    """The captures that only read their target share one trainer: its start (torch's import,
    two DataLoader workers: 12-14 s each under a loaded CI) is paid once, not four times. It
    trains until the class is done (its epoch is longer than the run, so its workers stay the
    same processes) and is stopped before the module's other tests start theirs."""

    @pytest.fixture(scope="class")
    def running(self):
        job = trainer_with_workers("--seconds", "600")
        yield job
        kill_tree(job)

    def test_a_flame_graph_covers_the_main_process_and_its_workers(self, running, tmp_path):
        doc, folder = capture("pyspy-flame", "--pid", str(running.pid), "--seconds", "3",
                              root=tmp_path)  # fmt: skip
        assert doc["status"] == "ok", doc["reason"]
        workers = [p.pid for p in psutil.Process(running.pid).children()]
        speedscope = json.loads((folder / "pyspy.speedscope.json").read_text())
        profiled = {p["name"].split()[1] for p in speedscope["profiles"]}
        assert {str(running.pid), *map(str, workers)} <= profiled
        assert any(s for p in speedscope["profiles"] for s in p["samples"])
        svg = (folder / "flame.svg").read_text()
        xml.dom.minidom.parseString(svg)
        assert f"Process {running.pid} Thread" in svg
        assert {f["path"] for f in doc["files"]} == {"pyspy.speedscope.json", "flame.svg"}
        assert {t["pid"] for t in doc["targets"]} >= {running.pid, *workers}
        assert doc["tool"]["argv"][1] == "record" and "--nonblocking" in doc["tool"]["argv"]

    def test_a_dump_has_every_process_as_text_and_json(self, running, tmp_path):
        doc, folder = capture("pyspy-dump", "--pid", str(running.pid), root=tmp_path)
        assert doc["status"] == "ok", doc["targets"]
        text = (folder / "stacks.txt").read_text()
        assert f"== pid {running.pid} (main)" in text
        assert text.count("(worker)") == 2
        stacks = json.loads((folder / "stacks.json").read_text())
        assert {s["role"] for s in stacks} >= {"main", "worker"}
        assert all(s["threads"] for s in stacks)

    def test_the_byte_cap_stops_a_dump_and_marks_it(self, running, tmp_path):
        doc, _ = capture(
            "pyspy-dump", "--pid", str(running.pid), "--max-mb", "0.0002", root=tmp_path
        )
        assert doc["status"] == "partial"
        assert "cap" in doc["reason"]
        assert any(t["status"] == "skipped" for t in doc["targets"])

    def test_a_torch_trace_without_an_agent_says_how_to_get_one(self, running, tmp_path):
        doc, _ = capture("torch-trace", "--pid", str(running.pid), root=tmp_path, expect=1)
        assert doc["status"] == "failed"
        assert "no gputop agent in pid" in doc["reason"] and "gputop run" in doc["reason"]


@pytest.mark.parametrize("trainer", [4], indirect=True)
def test_a_target_that_exits_mid_window_leaves_a_partial_capture(trainer, tmp_path):
    doc, folder = capture("pyspy-flame", "--pid", str(trainer.pid), "--seconds", "15",
                          root=tmp_path)  # fmt: skip
    assert doc["status"] == "partial", doc
    assert "exited during the capture" in doc["reason"]
    assert (folder / "pyspy.speedscope.json").stat().st_size > 0


def test_no_such_process_is_said_and_leaves_no_folder(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "capture", "pyspy-dump", "--pid", "999999999",
         "--dir", str(tmp_path / "caps")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 1  # as the monitor: a missing PID is not a usage error
    assert out.stderr.strip() == "gputop: pid 999999999 is not running: nothing to capture"
    assert not (tmp_path / "caps").exists()


def test_a_target_py_spy_may_not_read_fails_with_the_fix(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to run the capture as another user")
    up = "import time; print('up', flush=True); time.sleep(60)"
    job = subprocess.Popen([sys.executable, "-c", up], stdout=subprocess.PIPE, text=True)
    try:
        assert job.stdout is not None and job.stdout.readline() == "up\n"  # py-spy can read it
        # pytest's own tmp is root-only, and so may $TMPDIR be: /tmp is open to every user
        root = Path(tempfile.mkdtemp(prefix="gputop-caps-", dir="/tmp"))
        os.chmod(root, 0o1777)  # sticky, like /tmp: without it captures are refused there
        # this environment's py-spy may sit in a folder only root may enter (CI's mktemp venv)
        spy = root / "bin" / "py-spy"
        spy.parent.mkdir(mode=0o755)
        shutil.copy(find_py_spy(), spy)

        def attempt() -> str:
            os.environ["PATH"] = f"{spy.parent}{os.pathsep}{os.environ.get('PATH', '')}"
            m, _ = take("pyspy-dump", job.pid, root / "nobody")
            return f"{m.status}|{m.reason}"

        status, reason = as_nobody(attempt).split("|", 1)
    finally:
        job.kill()
        job.wait()
        shutil.rmtree(root, ignore_errors=True)
    assert status == "failed", reason
    assert "ptrace" in reason


def _median_step_ms(link, seconds: float = 2.0) -> tuple[float, int]:
    """Median step time over the agent's recent steps, and the step count, after ``seconds``."""
    import statistics

    deadline = time.monotonic() + seconds
    sample = link.sample()
    while time.monotonic() < deadline:
        time.sleep(0.2)  # pacing: the link read five times a second over the span measured
        sample = link.sample()
    steps = [s for a in sample.agents for s in a.steps][-50:]
    return statistics.median(s.dur_ns for s in steps) / 1e6, max(s.step for s in steps)


def test_a_torch_trace_of_three_steps_has_three_markers_and_training_goes_on(
    instrumented, tmp_path
):
    import gzip

    from gputop.sources.agent_link import AgentLink

    job = instrumented
    link = AgentLink(job.pid)
    try:
        before, _ = _median_step_ms(link, 3.0)
        doc, folder = capture("torch-trace", "--pid", str(job.pid), "--steps", "3", root=tmp_path)
        after, last = _median_step_ms(link, 2.0)
        _, later = _median_step_ms(link, 1.0)
    finally:
        link.close()
    assert doc["status"] == "ok", doc["reason"]
    (f,) = doc["files"]
    assert f["path"] == f"pid{job.pid}.pt.trace.json.gz"
    trace = json.loads(gzip.decompress((folder / f["path"]).read_bytes()))
    names = [e.get("name", "") for e in trace["traceEvents"]]
    assert sorted({n for n in names if n.startswith("ProfilerStep#")}) == [
        "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"
    ]  # fmt: skip
    (target,) = doc["targets"]
    first, end = target["steps"]
    assert end - first == 2 and target["torch"] and target["python"]
    assert later > last  # still training
    assert after < 1.5 * before + 1.0, (before, after)  # at its previous speed


def test_a_memory_snapshot_of_a_cpu_only_trainer_fails_in_words_and_training_goes_on(
    instrumented, tmp_path
):
    job = instrumented
    doc, folder = capture("memory-snapshot", "--pid", str(job.pid), root=tmp_path, expect=1)
    # no crash anywhere, and it still takes requests: a trace right after works
    trace, _ = capture("torch-trace", "--pid", str(job.pid), root=tmp_path)
    assert job.poll() is None
    assert doc["status"] == "failed" and doc["reason"] == "no CUDA device in the target"
    assert doc["files"] == [] and [f.name for f in folder.iterdir()] == ["manifest.json"]
    assert trace["status"] == "ok"


def test_py_spy_captures_take_versions_from_an_agent_when_there_is_one(instrumented, tmp_path):
    job = instrumented
    doc, _ = capture("pyspy-dump", "--pid", str(job.pid), root=tmp_path)
    main = next(t for t in doc["targets"] if t["pid"] == job.pid)
    assert main["python"] == sys.version.split()[0]
    assert main["torch"] and main["torch"].startswith("2.")
