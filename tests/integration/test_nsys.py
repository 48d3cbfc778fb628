"""The nsys path with a stand-in `nsys` first on PATH that records how it is called (the real
tool is not installed here): launch, start, stop and the session name are checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import psutil
import pytest
from tests_support import kill_tree, until

from gputop import schemas

REPO = Path(__file__).resolve().parents[2]
SCHEMA = schemas.load("capture")
SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def standin(tmp_path) -> dict[str, str]:
    """An environment whose PATH starts with the stand-in nsys; its calls go to env's log."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    body = (REPO / "tests" / "data" / "nsys_standin.py").read_text().split("\n", 1)[1]
    (bindir / "nsys").write_text(f"#!{sys.executable}\n{body}")
    (bindir / "nsys").chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
            "NSYS_STANDIN_LOG": str(tmp_path / "calls.jsonl"),
            "NSYS_STANDIN_STATE": str(tmp_path / "state.json")}  # fmt: skip


def calls(env: dict[str, str]) -> list[list[str]]:
    path = Path(env["NSYS_STANDIN_LOG"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def gputop(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputop", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def capture_a_plain_job(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    """`gputop capture nsys` on a Python process that was not started under nsys."""
    job = subprocess.Popen(SLEEPER)
    try:
        return gputop("capture", "nsys", "--pid", str(job.pid), "--dir", str(tmp_path / "c"),
                      "--json", env=env)  # fmt: skip
    finally:
        kill_tree(job)


def test_a_job_run_under_nsys_gets_a_window_on_its_session(standin, tmp_path):
    run = subprocess.Popen([sys.executable, "-m", "gputop", "run", "--nsys", "--no-tui", "--",
                            *SLEEPER], env=standin, stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        (job,) = until(lambda: psutil.Process(run.pid).children(), timeout=30,
                       what="the job `gputop run` starts", every=0.1)  # fmt: skip
        out = gputop("capture", "nsys", "--pid", str(job.pid), "--seconds", "1",
                     "--dir", str(tmp_path / "caps"), "--json", env=standin)  # fmt: skip
    finally:
        kill_tree(run)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["status"] == "ok", doc["reason"]
    assert [f["path"] for f in doc["files"]] == ["nsys.nsys-rep"]
    launch, *rest = calls(standin)
    assert launch[0] == "launch" and launch[1].startswith("--session-new=gputop-")
    assert launch[-len(SLEEPER) :] == SLEEPER
    session = launch[1].removeprefix("--session-new=")
    start = next(c for c in rest if c[0] == "start")
    stop = next(c for c in rest if c[0] == "stop")
    folder = tmp_path / "caps" / doc["id"]
    assert start == ["start", f"--session={session}", f"--output={folder.resolve() / 'nsys'}"]
    assert stop == ["stop", f"--session={session}"]
    assert rest.index(start) < rest.index(stop)


def test_a_job_not_started_under_nsys_gets_the_relaunch_command(standin, tmp_path):
    out = capture_a_plain_job(standin, tmp_path)
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and doc["status"] == "failed"
    assert "was not started under nsys" in doc["reason"]
    assert "cannot attach to a running process" in doc["reason"]
    assert "gputop run --nsys -- " in doc["reason"] and "time.sleep(60)" in doc["reason"]
    assert not [c for c in calls(standin) if c[0] in ("start", "stop")]


def test_without_nsys_on_path_both_commands_say_how_to_get_it(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # nothing there
    out = gputop("run", "--nsys", "--", *SLEEPER, env=env)
    assert out.returncode == 127
    assert "nsys is not on PATH: install the Nsight Systems CLI" in out.stderr
    out = capture_a_plain_job(env, tmp_path)
    assert json.loads(out.stdout)["reason"].startswith("nsys is not on PATH")
