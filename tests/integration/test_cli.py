"""`gputop` as a user runs it: a real subprocess, its exit code, what it prints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from tests_support import until

from gputop.commands import SUBCOMMANDS

OUTSIDE = tempfile.gettempdir()
REPO_ROOT = Path(__file__).resolve().parents[2]
"""Run from outside the checkout, so the installed package is what runs."""


def gputop(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=OUTSIDE,
        **kw,
    )


def test_no_driver_exits_nonzero_with_a_one_line_pointer_to_the_simulator():
    r = gputop("snapshot")
    assert r.returncode == 1
    assert r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert "no NVIDIA driver found" in line
    assert "--sim-board h100" in line


def test_json_snapshot_of_eight_simulated_h100s():
    r = gputop("snapshot", "--json", "--sim-board", "h100x8", "--sim-scenario", "compute")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1
    assert doc["source"]["kind"] == "simulated" and "8x NVIDIA H100" in doc["source"]["board"]
    assert len(doc["devices"]) == 8
    for i, d in enumerate(doc["devices"]):
        assert d["index"] == i
        s = d["sample"]
        assert s["util_gpu_pct"] >= 95
        assert s["sm_active_pct"] is not None  # two readings were taken: GPM is filled
        assert s["lost"] is None
        assert isinstance(s["na"], dict)


def test_table_names_the_simulation_and_throttling():
    r = gputop("snapshot", "--sim-board", "a100", "--sim-scenario", "power-throttled")
    assert r.returncode == 0, r.stderr
    assert "SIMULATED board: 1x NVIDIA A100-SXM4-40GB" in r.stdout
    assert "sw_power_cap (clocks cut to stay under the power limit)" in r.stdout
    assert "(default 400 W)" in r.stdout  # the lowered limit is called out


def test_old_driver_table_says_why_fields_are_missing():
    r = gputop("snapshot", "--sim-board", "a100", "--sim-driver", "r470")
    assert r.returncode == 0, r.stderr
    assert "n/a (not in this driver (470.256.02))" in r.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--sim-board", "v100"], "unknown simulated board 'v100'"),
        (["--sim-board", "t4-mig"], "does not support MIG"),
        (["--sim-board", "h100", "--sim-driver", "r999"], "unknown simulated driver"),
        (["--sim-board", "h100", "--sim-driver", "r470"], "needs driver R520 or later"),
        (["--sim-board", "l40s", "--sim-driver", "r515"], "use one of r535, r570, r580, r595"),
        (["--sim-board", "h100", "--sim-scenario", "nope"], "unknown scenario"),
        (["--sim-driver", "r470"], "need --sim-board"),
    ],
)
def test_bad_simulation_flags_are_usage_errors(args, words):
    r = gputop("snapshot", *args)
    assert r.returncode == 2
    assert words in r.stderr
    assert "Traceback" not in r.stderr


def test_bare_gputop_without_a_driver_points_to_the_demo():
    r = gputop()
    assert r.returncode == 1
    (line,) = r.stderr.strip().splitlines()
    assert "no NVIDIA driver found" in line and "`gputop demo`" in line
    assert "Traceback" not in r.stderr


def test_help_lists_the_commands():
    r = gputop("--help")
    assert r.returncode == 0
    assert "snapshot" in r.stdout and "demo" in r.stdout


@pytest.mark.parametrize("command", [None, *(c.NAME for c in SUBCOMMANDS)])
def test_every_command_has_help_with_examples(command):
    r = gputop(*([command] if command else []), "--help")
    assert r.returncode == 0, r.stderr
    assert re.search(r"\nexamples:\n  .*\bgputop ", r.stdout), r.stdout


def test_once_prints_one_reading_as_snapshot_does():
    for flag in ("-1", "--once"):
        r = gputop(flag, "--sim-board", "h100x2")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("gputop snapshot") and "GPU 1" in r.stdout


@pytest.mark.parametrize(
    ("args", "usage", "words"),
    [
        (["demo", "--board", "nosuch"], "usage: gputop demo", "unknown simulated board"),
        (["demo", "--interval", "-1"], "usage: gputop demo", "-1 s is outside 0.5..10 seconds"),
        (["--interval", "-1"], "usage: gputop [", "-1 s is outside 0.5..10 seconds"),
        (["--interval", "0"], "usage: gputop [", "0 s is outside 0.5..10 seconds"),
        (["diagnose", "--interval", "20"], "usage: gputop diagnose", "20 s is outside"),
        (["--theme", "nope", "--sim-board", "h100"], "usage: gputop [", "gputop-dark"),
        (["demo", "--theme", "nope"], "usage: gputop demo", "--theme nope: no such theme"),
        (["run"], "usage: gputop run", "nothing to run: give a command after --"),
    ],
)
def test_bad_values_stop_before_the_screen_with_the_commands_usage(args, usage, words):
    r = gputop(*args)  # no terminal here: a screen that opened would fail differently
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(usage), r.stderr
    assert words in r.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    "args",
    [
        ["--pid", "999999999"],
        ["snapshot", "--pid", "999999999", "--sim-board", "h100"],
        ["diagnose", "--pid", "999999999", "--duration", "1"],
        ["capture", "pyspy-dump", "--pid", "999999999"],
    ],
)
def test_a_missing_pid_exits_1_in_every_command(args, tmp_path):
    r = gputop(*args, "--dir", str(tmp_path)) if args[0] == "capture" else gputop(*args)
    assert r.returncode == 1, r.stderr
    assert "999999999" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args", [["demo"], ["--sim-board", "h100"], ["run", "--", "touch", "STARTED"]]
)
def test_no_terminal_no_screen_one_line_and_nothing_started(args, tmp_path):
    """stdin from /dev/null, stdout a pipe: Textual would start and spin a core for minutes."""
    r = subprocess.run([sys.executable, "-m", "gputop", *args], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 1, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "needs a terminal" in line and "gputop run --no-tui" in line and "diagnose" in line
    assert not (tmp_path / "STARTED").exists()  # the job was not started either


def test_demo_trainer_without_torch_says_so(tmp_path):
    """A Python without torch: one line naming the extra, before any screen or job."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO_ROOT}"}  # torch: not importable
    r = gputop("demo", "--trainer", "--workers 0", env=env)
    assert r.returncode == 1, r.stderr
    assert "has no torch" in r.stderr and "gputop[torch]" in r.stderr


def test_installed_console_script():
    script = Path(sys.executable).parent / "gputop"
    assert script.exists(), "install the package (pip install -e .) to get the gputop command"
    r = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("gputop ")
    r = subprocess.run(
        [str(script), "snapshot", "--sim-board", "t4"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "Tesla T4" in r.stdout


def test_the_monitor_never_loads_torch_or_cuda():
    code = (
        "import sys; from gputop.cli import main; "
        "rc = main(['snapshot', '--json', '--sim-board', 'h100']); "
        "heavy = ('torch', 'cupy', 'pycuda', 'textual'); "
        "bad = [m for m in sys.modules if m.split('.')[0] in heavy]; "
        "print(bad, file=sys.stderr); raise SystemExit(rc or len(bad))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=OUTSIDE
    )
    assert r.returncode == 0, r.stderr


def test_a_job_gputop_started_for_itself_dies_with_it(tmp_path):
    """`gputop diagnose -- CMD` (and the demo's trainer) must not outlive gputop, even when
    gputop is killed outright (an ssh drop mid-shutdown, kill -9)."""
    import os
    import signal

    import psutil

    gputop = subprocess.Popen(
        [sys.executable, "-m", "gputop", "diagnose", "--sim-board", "h100", "--duration", "60",
         "--log", str(tmp_path / "job.log"), "--", sys.executable, "-c",
         "import time; time.sleep(60)"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        children = until(lambda: psutil.Process(gputop.pid).children(), timeout=20,
                         what="the job gputop starts", every=0.1)  # fmt: skip
        job = children[0]
        os.kill(gputop.pid, signal.SIGKILL)
        gputop.wait(timeout=10)
        gone, _ = psutil.wait_procs([job], timeout=10)
        assert gone, "the job outlived gputop"
    finally:
        gputop.kill()
        for p in psutil.Process().children(recursive=True):
            p.kill()
