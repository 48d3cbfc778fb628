"""`gputop watch`: a job watched without a screen until it ends, a line per event on stdout
whatever stdout is (a pipe here: a log or a shell loop reads it), the findings at the end;
and what it refuses, in one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gputop.cli import main

pytestmark = pytest.mark.slow  # starts a real job


def test_a_job_is_watched_until_it_ends_with_a_line_per_change(tmp_path):
    job = "import time\nend = time.monotonic() + 4\nwhile time.monotonic() < end: pass\n"
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "watch", "--no-history", "--arm", "hung",
         "--capture-dir", str(tmp_path / "caps"), "--sim-board", "h100",
         "--", sys.executable, "-c", job],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "gputop diagnose" and any(" s  " in line for line in lines[1:4]), lines
    assert "the command exited with status 0" in out.stdout
    assert "until it ends" in out.stderr and "armed: hung" in out.stderr
    assert not (tmp_path / "caps").exists()  # nothing fired: nothing written


def test_watch_needs_a_job_and_arm_names_real_triggers(capsys):
    with pytest.raises(SystemExit) as e:
        main(["watch", "--sim-board", "h100"])
    assert e.value.code == 2 and "watch needs a job" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["watch", "--pid", "1", "--arm", "hang"])
    assert e.value.code == 2
    assert "hang: not a trigger; choose from hung, straggler" in capsys.readouterr().err
