"""Did it help, on real jobs: six corpus scenarios (a data wait, GC, evaluation, checkpoints, a
straggler, DDP's all-reduce) started by `gputop diagnose`, then their twin with the principal's
lever applied attached to by PID, both remembered in one state folder: the twin's before/after
names the lever and holds, in its interval, the change the job's own clocks measured. gputop
runs from its wheel in its own venv, the jobs from another (tests/integration/conftest.py).

Not ``alone``: the first run's verdict is each scenario's from 6 s at the latest under a busy
core (test_separate_install.py's WATCH_S), and the truth is the same run's clocks."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest
from _clocks import ENV as CLOCKS_ENV
from _clocks import step_times
from harness import ATTACH_DELAY, Harness, kill_job
from scenarios import by_name
from tests_support import REPO

from gputop import schemas
from gputop.diagnose import STEPS_LEAST
from gputop.inject.debugger import find_debugger
from gputop.sources.stacks import find_py_spy

pytest.importorskip("torch")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed"),
    pytest.mark.skipif(
        find_debugger() is None, reason="attaching needs gdb or lldb (or Python 3.14's remote_exec)"
    ),
]

CORPUS = REPO / "tests" / "corpus"
DIAGNOSE_SCHEMA = schemas.load("diagnose")


@dataclass(frozen=True)
class Pair:
    """A corpus scenario and the flags that apply its principal's lever (issue 53)."""

    scenario: str
    applied: tuple[str, ...]
    named: frozenset[str]
    """What the comparison may name as the lever: the flag, or the setting the agent reads."""
    extra: tuple[str, ...] = ()
    """Flags of both runs (a smaller model where the scenario's steps are long)."""
    watch_s: float = 10.0
    """Each run's watch: long enough for the first run's verdict (held from 6 s at the latest
    started by diagnose under a busy core) and for 64 steps after 16 of warm-up (the
    straggler's steps take 230 ms alone and 280 beside other tests, DDP's all-reduce of 50 MB
    about 80: clone15's straggler made 61 in 25 s)."""


ENOUGH_STEPS = STEPS_LEAST + 4
"""A run compared needs STEPS_LEAST after its warm-up; a watch that saw fewer (its steps slowed
by the machine) is made once more, LONGER times as long."""
LONGER = 2.5

PAIRS = (
    Pair("text_workers", ("--tokenise-ahead",), frozenset({"--tokenise-ahead"})),
    Pair("gc_pressure", ("--gc-threshold", "50000,20,20"),
         frozenset({"--gc-threshold", "gc.threshold"})),
    Pair("eval_every_n", ("--eval-every", "50"), frozenset({"--eval-every"})),
    Pair("frequent_checkpoints", ("--every", "8"), frozenset({"--every"})),
    Pair("torchrun_straggler", ("--balanced",), frozenset({"--balanced"}), watch_s=35.0),
    Pair("ddp_big_grad", ("--bucket-cap-mb", "100"),
         frozenset({"--bucket-cap-mb", "parallel.bucket_cap_mb"}), ("--vocab", "100000"), 24.0),
)  # fmt: skip


def _watched(
    h: Harness, p: Pair, applied: bool, attached: bool, state: Path, clocks: Path, watch_s: float
):
    """The scenario (with the lever ``applied``) watched once for ``watch_s``: started by
    `gputop diagnose -- CMD`, or started plainly and attached to; (its document, when diagnose
    returned)."""
    s = by_name(p.scenario)
    script = h.command(s, LONGER * p.watch_s + 40)  # one length for every watch of the pair:
    # the job's arguments are part of what the comparison says changed
    at = script.index("--seconds")
    script[at:at] = [*p.extra, *(p.applied if applied else ())]
    env = {**os.environ, "XDG_STATE_HOME": str(state), CLOCKS_ENV: str(clocks)}
    watch = ["--duration", str(watch_s)]
    if not attached:
        out = subprocess.run(h.diagnose(*watch, "--", *script), capture_output=True, text=True,
                             timeout=watch_s + 120, cwd=CORPUS, env=env)  # fmt: skip
        return json.loads(out.stdout), time.time()
    job = subprocess.Popen(script, cwd=CORPUS, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True, env=env)  # fmt: skip
    try:
        time.sleep(ATTACH_DELAY)  # pacing: the job runs on its own before gputop attaches
        out = subprocess.run(h.diagnose("--pid", str(job.pid), "--attach", *watch),
                             capture_output=True, text=True, timeout=watch_s + 120,
                             env=env)  # fmt: skip
        return json.loads(out.stdout), time.time()
    finally:
        kill_job(job)


def _mean_step(doc: dict, clocks: Path, end: float) -> float:
    """The main rank's mean step by the job's own clocks, over the steps gputop's run counted."""
    ranks = (doc["budget"] or {}).get("ranks") or []
    main = next(r for r in ranks if r["rank"] in (0, None))
    times = step_times(str(clocks / f"{main['pid']}.jsonl"), end, doc["run"]["steps"])
    assert len(times) >= 64, (main, len(times))
    return sum(times) / len(times)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.scenario)
def test_a_lever_applied_is_named_and_its_change_measured(pair, separate, tmp_path):
    """The job started by diagnose, then its twin with the lever applied attached to: the
    second's before/after names the lever and measures a change whose interval holds the
    change the job's own clocks measured."""
    state = tmp_path / "state"
    docs = []
    for applied in (False, True):
        for watch_s in (pair.watch_s, LONGER * pair.watch_s):
            clocks = tmp_path / f"clocks-{applied}-{watch_s:g}"
            clocks.mkdir()
            doc, end = _watched(separate, pair, applied, attached=applied, state=state,
                                clocks=clocks, watch_s=watch_s)  # fmt: skip
            if ((doc.get("run") or {}).get("steps") or 0) >= ENOUGH_STEPS:
                break  # else a machine busier than the watch was sized for: once, longer
        jsonschema.validate(doc, DIAGNOSE_SCHEMA)
        docs.append((doc, _mean_step(doc, clocks, end)))
    (first, before), (second, after) = docs
    assert second["baseline"] is not None, (first["run"], second["run"], second["problems"])
    b = second["baseline"]
    seen = json.dumps({k: b[k] for k in ("last", "change", "changed", "lever", "slices")})
    assert b["lever"] is not None and b["lever"]["setting"] in pair.named, seen
    truth = after / before - 1
    low, high = second["baseline"]["change"]["interval"]
    assert low <= truth <= high, (truth, seen)
