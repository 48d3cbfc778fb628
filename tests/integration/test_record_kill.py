"""A recording survives SIGKILL: `gputop diagnose --record` on a real instrumented trainer and
a simulated two-GPU board, killed mid-write, leaves a file that `gputop replay --check`
recomputes verdict for verdict and `gputop report` summarises (the minutes after the last
summary from their records). The file is private, and never overwritten."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import psutil
import pytest
from tests_support import until_or_none

from gputop import schemas
from gputop.record.reader import open_recording

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SCHEMA = schemas.load("report")
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}

pytestmark = pytest.mark.slow


def gputop(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputop", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env=ENV, **kw)  # fmt: skip


def rank0_steps(path: Path) -> int:
    """Steps rank 0's agent has reported in the file so far (0 while it cannot be read)."""
    try:
        recording = open_recording(path)
        latest = 0
        for rec in recording.records():
            if rec.kind == "agents":
                for a in rec.value.agents:
                    if (a.rank or 0) == 0 and a.steps:
                        latest = max(latest, a.steps[-1].step + 1)
        return latest
    except Exception:  # the header may not be on disk yet
        return 0


def kill_all(job: subprocess.Popen, below: list[psutil.Process]) -> None:
    """SIGKILL gputop, then the trainer it started (its own session: gputop's Job) and its
    DataLoader workers, which SIGKILL leaves behind."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(job.pid, signal.SIGKILL)
    job.wait(timeout=10)
    for p in below:
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            p.kill()


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """A recording whose recorder was killed with SIGKILL after some seconds of steps."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("kill")
    path = folder / "session.gputop"
    log = folder / "gputop.log"
    cmd = [
        sys.executable, "-m", "gputop", "diagnose", "--sim-board", "h100x2", "--duration", "60",
        "--interval", "0.5", "--record", str(path),
        "--", sys.executable, str(EXAMPLES / "mlp_train.py"), "--steps", "100000",
        "--seconds", "60", "--threads", "1",
    ]  # fmt: skip
    with log.open("wb") as err:
        job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO, env=ENV,
                               preexec_fn=lambda: os.umask(0))  # fmt: skip
    started = time.monotonic()
    below: list[psutil.Process] = []

    def recorded() -> bool:
        nonlocal below
        if job.poll() is not None:
            pytest.fail(f"gputop exited with {job.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(psutil.Error):
            below = psutil.Process(job.pid).children(recursive=True) or below
        size = path.stat().st_size if path.exists() else 0
        return time.monotonic() - started >= 4 and size > 4096 and rank0_steps(path) >= 5

    try:
        if until_or_none(recorded, timeout=25, every=0.25) is None:
            pytest.fail(f"no steps recorded within 25 s: {log.read_text()[-2000:]}")
        with contextlib.suppress(psutil.Error):
            below = psutil.Process(job.pid).children(recursive=True) or below
    finally:
        kill_all(job, below)
    assert job.returncode == -signal.SIGKILL
    return path


def test_a_killed_recording_replays_with_every_verdict_equal(killed):
    r = gputop("replay", "--check", str(killed))
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert re.fullmatch(r"\d+ recorded verdicts recomputed from the recorded readings: all equal",
                        first), r.stdout  # fmt: skip
    assert int(first.split()[0]) >= 4  # at least 4 s at 0.5 s
    assert "Traceback" not in r.stderr


def test_a_killed_recording_reports_its_verdicts_and_steps(killed):
    r = gputop("report", "--no-charts", str(killed))
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "Time per verdict" in text and "no verdict was recorded" not in text
    assert "GPUs: 2 x NVIDIA H100" in text and "(SIMULATED: 2x NVIDIA H100" in text
    assert "-0 s" not in text
    steps = text.split("Steps per rank", 1)[1]
    row = re.search(r"^ +0 +(\d+) +([\d.]+) ms +([\d.]+) ms", steps, re.MULTILINE)
    assert row is not None, steps
    assert int(row[1]) > 0 and 0 < float(row[2]) <= float(row[3]), row[0]
    assert "Phase breakdown (rank 0)" in text
    assert "Traceback" not in r.stderr
    # killed mid-write or between two frames: either way every byte before is read
    for line in r.stderr.splitlines():
        assert line.startswith(f"gputop: {killed} ends inside a frame"), r.stderr


def test_a_killed_recording_reports_as_json(killed):
    r = gputop("report", "--json", str(killed))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["recording"]["mode"] == "diagnose"
    assert doc["recording"]["simulated"].startswith("2x NVIDIA H100")
    assert doc["recording"]["duration_s"] >= 3
    rank0 = doc["ranks"][0]
    assert rank0["rank"] == 0 and rank0["steps"] > 0 and rank0["step_s_median"] > 0
    assert "data_wait" in rank0["phases"] or "forward" in rank0["phases"]
    assert [g["gpu"] for g in doc["gpus"]] == [0, 1]
    assert sum(v["seconds"] for v in doc["verdicts"]) > 0


def test_the_recording_is_private_even_under_umask_0(killed):
    assert killed.stat().st_mode & 0o777 == 0o600


def test_an_existing_file_is_never_overwritten(tmp_path):
    path = tmp_path / "precious.gputop"
    path.write_bytes(b"an earlier recording\n")
    os.utime(path, (1_000_000, 1_000_000))
    before = path.stat()
    for args in (
        ("diagnose", "--sim-board", "h100", "--duration", "1", "--record", str(path)),
        ("record", "--pid", str(os.getpid()), "--sim-board", "h100", "-o", str(path)),
    ):
        r = gputop(*args, timeout=30)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1, r.stderr
        assert r.stderr == (
            f"gputop: {path} exists: gputop never overwrites a recording; give another name\n"
        )
        assert r.stdout == ""
    after = path.stat()
    assert path.read_bytes() == b"an earlier recording\n"
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
        before.st_mtime_ns,
        before.st_size,
        before.st_ino,
    )
