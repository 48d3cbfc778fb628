"""Armed captures on real jobs with a mid-run event, each started by `gputop diagnose -- CMD`
and started plainly then attached to (gputop from its wheel in its own venv, the job in a venv
without gputop): a hang gets its native py-spy dumps within 20 s of the verdict naming it, a
rank that turns slow and a step time that regresses after an eval get a torch trace of the
rank that starts within 2 of its steps after the verdict named the event; every manifest holds
the trigger and the verdict.

The events come a few seconds in (the warm-up shortened to match: ``--arm-warmup``), not after
a minute: what is measured is the time from the verdict to the capture, not the job's age."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from harness import CORPUS, Harness, kill_job
from tests_support import free_port, note_figure, until

pytestmark = pytest.mark.slow  # each test runs a real job for tens of seconds

HANG_LATENCY_S = 20.0
STEPS_LATENCY = 2
TRACE_WARMUP = 1
"""The agent's profiler schedule warms up one step before it records (``agent/trace.py``)."""


@dataclass(frozen=True)
class Event:
    name: str
    script: tuple[str, ...]
    trigger: str
    kind: str
    bound: str
    """The verdict's bound that names the event, "" for a shift (the chart's mark)."""
    watch_s: float


EVENTS = (
    Event("hang", ("hang_spawn_rank_waits.py", "--stuck-after", "6", "--seconds", "300"),
          "hung", "pyspy-dump", "hung", 50.0),
    Event("straggler", ("spawn_straggler.py", "--slow-after", "8", "--gpu-ms", "60",
                        "--seconds", "300"), "straggler", "torch-trace", "straggler", 40.0),
    Event("regression", ("eval_leak.py", "--eval-every", "60", "--leak-from", "120",
                         "--gpu-ms", "60", "--seconds", "300"), "regression", "torch-trace", "",
          40.0),
)  # fmt: skip


def _argv(h: Harness, e: Event) -> list[str]:
    script = [h.job_python, str(CORPUS / e.script[0]), *e.script[1:]]
    if "spawn" in e.script[0]:
        script += ["--port", str(free_port())]
    return script


def _watch(h: Harness, e: Event, attached: bool, captures: Path) -> tuple[dict, int]:
    """The job watched with its trigger armed until it fired and its captures are written
    (``--exit-on``), or ``watch_s`` passed: (diagnose's document, its exit status)."""
    flags = ["--no-history", "--interval", "0.5", "--arm-warmup", "3", "--exit-on", e.trigger,
             "--capture-dir", str(captures), "--duration", str(e.watch_s)]  # fmt: skip
    if not attached:
        out = subprocess.run(h.diagnose(*flags, "--", *_argv(h, e)), capture_output=True,
                             text=True, timeout=e.watch_s + 120, cwd=CORPUS)  # fmt: skip
        return json.loads(out.stdout), out.returncode
    job = subprocess.Popen(_argv(h, e), cwd=CORPUS, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    processes = 3 if "spawn" in e.script[0] else 1  # mp.spawn: the launcher and two ranks
    try:
        until(lambda: job.poll() is not None or _torch_in(job.pid) >= processes, timeout=90,
              what="the job's processes up")  # fmt: skip
        time.sleep(1.0)  # pacing: the ranks past their rendezvous, in Python where gdb loads
        out = subprocess.run(h.diagnose("--pid", str(job.pid), "--attach", *flags),
                             capture_output=True, text=True, timeout=e.watch_s + 120)  # fmt: skip
        return json.loads(out.stdout), out.returncode
    finally:
        kill_job(job)


def _torch_in(pid: int) -> int:
    """Processes of the job that imported torch (its libraries mapped)."""
    try:
        tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return 0
    count = 0
    for p in tree:
        try:
            count += "libtorch" in Path(f"/proc/{p.pid}/maps").read_text()
        except OSError:
            continue
    return count


def _manifests(captures: Path) -> list[dict]:
    return [json.loads(m.read_text()) for m in sorted(captures.glob("*/manifest.json"))]


@pytest.mark.parametrize("attached", [False, True], ids=["run", "attached"])
@pytest.mark.parametrize("e", EVENTS, ids=lambda e: e.name)
def test_the_fitting_capture_starts_at_once_with_the_trigger_in_its_manifest(
    e, attached, separate, tmp_path
):
    captures = tmp_path / "captures"
    doc, status = _watch(separate, e, attached, captures)
    armed = doc["armed"]
    said = [f"{a['t_s']} {a['what']} {a['kind']} {a['why'][:80]}" for a in armed]
    fired = [a for a in armed if a["what"] == "fired" and a["trigger"] == e.trigger]
    assert fired, (said, doc["timeline"], doc["problems"])
    assert status == 3 and doc["exit_on"] == e.trigger, (status, said)
    started = [a for a in armed if a["what"] == "started" and a["kind"] == e.kind]
    assert started, said
    manifests = [m for m in _manifests(captures) if m["kind"] == e.kind]
    assert manifests and all(m["trigger"]["trigger"] == e.trigger for m in manifests)
    first = manifests[0]
    assert first["status"] in ("ok", "partial"), (first["status"], first["reason"])
    assert first["trigger"]["verdict"]["principal"], first["trigger"]
    verdict = first["trigger"]["verdict"]
    if e.bound:  # the verdict named it when it fired (its principal or a secondary bound)
        assert e.bound in (verdict["principal"], *verdict["secondary"]), verdict
    if e.kind == "pyspy-dump":
        late_s = started[0]["t_s"] - fired[0]["t_s"]
        note_figure("seconds from the verdict to the dump", late_s, HANG_LATENCY_S)
        assert late_s <= HANG_LATENCY_S, said
        assert all(t["note"].startswith("with native frames") or t["status"] != "ok"
                   for t in first["targets"])  # fmt: skip
        return
    late = _steps_late(first)
    note_figure("steps from the verdict to the trace", late, STEPS_LATENCY)
    assert late <= STEPS_LATENCY, first["trigger"]["steps_after"]


def _steps_late(m: dict) -> int:
    """Steps of the traced rank that started after the trigger fired and before its profiler
    started (at the boundary before its warm-up step)."""
    rank = m["trigger"]["ranks"][0] if m["trigger"]["ranks"] else None
    target = next(t for t in m["targets"] if rank is None or t["pid"] == rank)
    assert target["steps"], target
    profiler_from = target["steps"][0] - TRACE_WARMUP
    after = next(r for r in m["trigger"]["steps_after"] if r["pid"] == target["pid"])
    begun = [s[0] for s in after["steps"]]
    assert begun, after
    return max(0, profiler_from - min(begun))
