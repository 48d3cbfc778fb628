"""`gputop diagnose --prometheus` end to end: a real trainer, a simulated two-GPU board, and
/metrics scraped over HTTP while the job runs, parsed with prometheus-client's own parser."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from tests_support import free_port, kill_tree, scrape, steps_of, until, until_or_none

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

pytestmark = pytest.mark.slow


def wait_for_steps(port: int, job: subprocess.Popen, log: Path, timeout: float = 20) -> dict:
    def counted() -> dict | None:
        if job.poll() is not None:
            pytest.fail(f"gputop diagnose exited with {job.returncode}: {log.read_text()[-2000:]}")
        fams = scrape(port)
        return fams if any(v > 0 for v in steps_of(fams).values()) else None

    fams = until_or_none(counted, timeout, every=0.25)
    if fams is None:
        pytest.fail(f"no steps on /metrics within {timeout} s: {log.read_text()[-2000:]}")
    return fams


@pytest.fixture
def diagnosed():
    """`gputop diagnose --prometheus` on the instrumented trainer: (port, process, log)."""
    pytest.importorskip("torch")
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="gputop-prom-", suffix=".log")[1])
    cmd = [
        sys.executable, "-m", "gputop", "diagnose", "--sim-board", "h100x2", "--duration", "25",
        "--interval", "0.5", "--prometheus", f"127.0.0.1:{port}",
        "--", sys.executable, str(EXAMPLES / "mlp_train.py"), "--steps", "100000",
        "--seconds", "30", "--threads", "1",
    ]  # fmt: skip
    with log.open("wb") as err:
        job = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=REPO,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    try:
        yield port, job, log
    finally:
        kill_tree(job)
        log.unlink(missing_ok=True)


def test_a_running_job_is_scraped_with_bounded_well_named_metrics(diagnosed):
    port, job, log = diagnosed
    first = wait_for_steps(port, job, log)
    done = sum(steps_of(first).values())

    def later() -> dict | None:  # a few more steps and verdicts than the first scrape saw
        fams = scrape(port)
        return fams if fams and sum(steps_of(fams).values()) >= done + 5 else None

    second = until(later, timeout=30, what=f"5 steps more on /metrics: {log}")

    # both simulated GPUs, labelled as dcgm-exporter labels them
    for name in ("gputop_gpu_power_watts", "gputop_gpu_sm_clock_hertz"):
        labels = [s.labels for s in second[name].samples]
        assert {tuple(sorted(lab)) for lab in labels} == {("UUID", "gpu")}, labels
        assert sorted(lab["gpu"] for lab in labels) == ["0", "1"]
        assert all(lab["UUID"] for lab in labels)

    # steps per rank, counted up between two scrapes
    before, after = steps_of(first), steps_of(second)
    assert set(after) == {"0"}, after
    assert after["0"] > before["0"] > 0

    phases = {s.labels["phase"] for s in second["gputop_phase_seconds"].samples}
    assert "data_wait" in phases, phases

    states = [s for s in second["gputop_verdict"].samples]
    assert {tuple(s.labels) for s in states} == {("bound",)}
    assert [s.value for s in states].count(1.0) == 1, states
    assert all(s.value in (0.0, 1.0) for s in states)

    for fam in second.values():
        assert fam.name.startswith("gputop_"), fam.name
        for s in fam.samples:
            assert s.name.startswith("gputop_"), s.name
            if fam.type == "counter":
                assert s.name.endswith("_total"), s.name
            assert "step" not in s.labels and ("pid" not in s.labels or fam.name.endswith("_info"))
