"""A wedged driver in the headless modes: `diagnose` ends at its duration and `record` on
SIGINT, each saying in one line that NVML stopped answering, as the screen and `snapshot` do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests_support import REPO

WEDGE = """
import sys
import gputop.sim as sim
from gputop.sim.board import Fault
real = sim.start_simulated_board
def wedged(*args, **kwargs):
    board = real(*args, **kwargs)
    # NVML opens, answers for a second, then one call never returns (as a wedged driver's)
    board.faults.append(Fault(hang=True, symbol="nvmlDeviceGetPowerUsage",
                              start=board.elapsed + 1.0))
    return board
sim.start_simulated_board = wedged
from gputop.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _gputop(*argv: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", WEDGE, *argv], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)  # fmt: skip


def test_diagnose_ends_at_its_duration_and_says_nvml_stalled():
    p = _gputop("diagnose", "--sim-board", "h100", "--duration", "4", "--interval", "0.5")
    try:
        out, err = p.communicate(timeout=60)  # it used to stay silent past 40 s
    finally:
        p.kill()
    assert p.returncode == 0, err
    assert "NVML has not answered for over" in out, out
    assert "Traceback" not in err


def test_record_stops_on_sigint_with_a_wedged_driver(tmp_path):
    target = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.2)"])
    rec = tmp_path / "wedged.gputop"
    try:
        p = _gputop("record", "--pid", str(target.pid), "-o", str(rec), "--sim-board", "h100",
                    "--interval", "0.5")  # fmt: skip
        assert p.stderr is not None
        while "recording pid" not in p.stderr.readline():
            pass
        time.sleep(4)  # pacing: the run goes past the wedge (1 s in) and the 2 s watchdog deadline
        p.send_signal(signal.SIGINT)
        err = p.communicate(timeout=60)[1]  # it used to ignore SIGINT
    finally:
        p.kill()
        target.kill()
        target.wait()
    assert p.returncode == 0, err
    assert "NVML has not answered for over" in err
    assert "Traceback" not in err
    assert rec.stat().st_size > 0
