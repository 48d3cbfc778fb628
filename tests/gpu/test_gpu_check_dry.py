"""The prepared GPU check, end to end on the simulated board (``--dry``): what CI keeps working
for the day a GPU is lent. One run (~40 s on an idle machine) serves every check below."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.alone]


def check(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    """``check.sh`` run as a user runs it, its output kept."""
    return subprocess.run(
        ["bash", str(HERE / "check.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def dry(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpu-check")
    # as CI might have it: the checkout on PYTHONPATH, which would let a job import gputop if
    # the check passed it on
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = check("--dry", "--out", str(out), env={**env, "GPU_CHECK_PYTHON": sys.executable},
                 timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_the_dry_check_writes_its_few_small_files_whole(dry):
    names = sorted(p.name for p in dry.iterdir())
    assert names == ["captures.json", "env.json", "nvml.json", "runs.json", "summary.txt"]
    for p in dry.iterdir():
        assert p.stat().st_size < 1024 * 1024, p
    env = json.loads((dry / "env.json").read_text())
    assert {n: s["status"] for n, s in env["steps"].items()} == dict.fromkeys(
        ["env", "install", "nvml", "runs", "captures"], "ok"
    )
    summary = (dry / "summary.txt").read_text()
    assert "DRY: the simulated board" in summary and "0 disagreement(s)" in summary


def test_the_dry_check_reads_four_phases_that_agree_with_the_twin(dry):
    nvml = json.loads((dry / "nvml.json").read_text())
    assert nvml["simulated"] is True
    assert list(nvml["phases"]) == ["idle", "matmul", "bandwidth", "tiny"]
    for phase in nvml["phases"].values():
        assert phase["load"]["ok"] and len(phase["readings"]) == 5
        assert "sample" in phase["gputop"], phase["gputop"]  # gputop's own reading, too
    assert nvml["comparison"]["disagreements"] == []


def test_the_dry_check_runs_each_job_both_ways_and_no_job_can_import_gputop(dry):
    runs = json.loads((dry / "runs.json").read_text())["runs"]
    assert [(r["job"], r["mode"]) for r in runs] == [
        (job, mode)
        for job in ("healthy", "starved", "launch_bound", "membw")
        for mode in ("started", "attached")
    ]
    for r in runs:
        assert r["rc"] == 0 and r["timeline"], r
        assert r["job_says"].endswith("gputop importable: False"), r["job_says"]


def test_the_dry_check_takes_three_captures_each_ok_or_with_its_reason(dry):
    caps = json.loads((dry / "captures.json").read_text())
    assert caps["torch-trace"]["status"] == "ok"
    assert caps["torch-trace"]["digest"]["events_per_category"]
    for kind in ("memory-snapshot", "nsys"):
        assert caps[kind]["status"] == "ok" or caps[kind]["reason"], caps[kind]


def test_only_reruns_a_part_and_keeps_the_other_files(dry):
    before = {n: (dry / n).read_text() for n in ("nvml.json", "runs.json", "captures.json")}
    done = check("--dry", "--only", "env", "--out", str(dry),
                 env={**os.environ, "GPU_CHECK_PYTHON": sys.executable}, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {n: (dry / n).read_text() for n in before} == before
    steps = json.loads((dry / "env.json").read_text())["steps"]
    assert list(steps) == ["env", "install", "nvml", "runs", "captures"]  # the earlier ones kept


def test_without_a_gpu_and_without_dry_it_says_so_in_one_line(tmp_path):
    env = {**os.environ, "PATH": "/usr/bin:/bin", "GPU_CHECK_PYTHON": sys.executable}
    done = check("--out", str(tmp_path), env=env)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "no NVIDIA GPU here" in done.stderr, done.stderr


def test_dry_on_a_python_without_gputops_dependencies_says_which_in_one_line(tmp_path):
    """A bare python3 (no nvidia-ml-py) would run every step into an import error."""
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    env = {**os.environ, "GPU_CHECK_PYTHON": str(bare / "bin" / "python")}
    env.pop("PYTHONPATH", None)
    done = check("--dry", "--out", str(tmp_path / "out"), env=env)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "lacks nvidia-ml-py" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_on_a_gpu_a_load_that_cannot_start_leaves_its_phase_with_why_and_the_others_go_on(
    tmp_path, monkeypatch
):
    """The real (not --dry) NVML step, over a simulated board below pynvml, on a machine whose
    torch has no CUDA: each load fails to start, says why in one line, and the idle phase is
    still read and compared."""
    import argparse

    import gpu_check
    import nvml_phases

    from gputop.sim import SimBoard, installed

    monkeypatch.setattr(nvml_phases, "INTERVAL_S", 0.2)

    check = gpu_check.Check(argparse.Namespace(dry=False, out=str(tmp_path), board="h100"))
    with installed(SimBoard("h100")):
        check.step_nvml()
    check.write()
    nvml = json.loads((tmp_path / "nvml.json").read_text())
    assert nvml["simulated"] is False and len(nvml["phases"]["idle"]["readings"]) == 5
    for phase in ("matmul", "bandwidth", "tiny"):
        load = nvml["phases"][phase]["load"]
        assert not load["ok"] and load["reason"] == (
            f"the {phase} load ended before it was ready: AssertionError: no CUDA device"
        )
        assert nvml["phases"][phase]["readings"] == []
    comparison = nvml["comparison"]
    assert comparison["disagreements"] == []
    assert f"tiny: {nvml['phases']['tiny']['load']['reason']}" in comparison["notes"]
