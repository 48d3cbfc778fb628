"""`gputop run --no-tui`'s summary counts every step of the run (issue 18 item 8: a run that
printed step 100 was reported as 50 steps, the median window's size)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.model.steps import AgentState, StepRecord
from gputop.run import StepTally

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _agent(steps: range) -> AgentState:
    records = tuple(StepRecord(n, n * 1000, 1000, {"forward": 900}) for n in steps)
    return AgentState(
        pid=7, state="connected", rank=None, local_rank=None, world_size=None, hostname=None,
        argv=(), fingerprint={}, steps=records, open_phase=None, open_age_s=None,
        since_step_s=None, heartbeat_age_s=None, agent_errors=0, dropped=0,
    )  # fmt: skip


def test_steps_repeated_across_readings_count_once_and_skipped_ones_count_too():
    tally = StepTally()
    tally.add([_agent(range(0, 40))])
    tally.add([_agent(range(10, 60))])  # repeats 10..39
    tally.add([_agent(range(500, 1012))])  # 60..499 went by between readings
    assert tally.counts == {7: 1012}


def test_no_tui_reports_every_step_of_the_run():
    pytest.importorskip("torch")
    r = subprocess.run(
        [sys.executable, "-m", "gputop", "run", "--no-tui", "--", sys.executable,
         str(EXAMPLES / "mlp_plain.py"), "--steps", "120", "--sync-every", "120"],
        capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "step 120 loss" in r.stdout  # the job's own count
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("gputop: pid")]
    assert re.search(r": 120 steps, median [0-9.]+ ms over the last 50 ", line), line
