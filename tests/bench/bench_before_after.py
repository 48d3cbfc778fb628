"""Did it help, measured: a job run again and again under `gputop diagnose`, each run compared
with the one before by the job's memory (issue 53). Prints how often an unchanged job is said
unchanged (its interval holds 0; at least 19 in 20 wanted) and how often a slowdown of 2% of
the step, injected as a wait in the job's data, is told within 300 steps (at least 9 in 10),
with each run's measured change, its interval and the change the job's own clocks measured.

    python tests/bench/bench_before_after.py [--same 20] [--slower 10] [--watch 8]
        [--gputop PATH] [--job-python PATH]

The job is tests/corpus/slower_midway.py with its slower shard from step 0: --extra-ms 0 as
built, the 2% (of its step as the first run measured it) for the slowed runs, which take turns
with unchanged ones so each compares with one of the other kind.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "corpus"), str(TESTS)]
from _clocks import ENV as CLOCKS_ENV  # noqa: E402
from _clocks import step_times  # noqa: E402

CORPUS = TESTS / "corpus"


def run(gputop: list[str], py: str, extra_ms: float, watch: float, state: str) -> dict:
    """One watched run; its document with the job's own mean step over gputop's steps."""
    with tempfile.TemporaryDirectory(prefix="bench-clocks-") as clocks:
        script = [py, "slower_midway.py", "--from-step", "0", "--extra-ms", f"{extra_ms:.4f}",
                  "--seconds", str(watch + 30)]  # fmt: skip
        out = subprocess.run(
            [*gputop, "diagnose", "--json", "--duration", str(watch), "--", *script],
            capture_output=True, text=True, timeout=watch + 120, cwd=CORPUS,
            env={**os.environ, "XDG_STATE_HOME": state, CLOCKS_ENV: clocks},
        )  # fmt: skip
        end = time.time()
        doc = json.loads(out.stdout)
        pid = next(r["pid"] for r in doc["budget"]["ranks"] if r["rank"] in (0, None))
        times = step_times(os.path.join(clocks, f"{pid}.jsonl"), end, doc["run"]["steps"])
        doc["clocks_step_s"] = sum(times) / len(times) if times else None
        return doc


def line(kind: str, doc: dict, last: dict) -> str:
    c = doc["baseline"]["change"]
    truth = doc["clocks_step_s"] / last["clocks_step_s"] - 1
    lo, hi = c["interval"]
    return (f"{kind:<6} steps {doc['run']['steps']:>5}  measured {100 * c['rel']:+6.2f}% "
            f"[{100 * lo:+6.2f}, {100 * hi:+6.2f}]  clocks {100 * truth:+6.2f}%  "
            f"{'CHANGED' if c['distinguishable'] else 'same'}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--same", type=int, default=20, help="unchanged runs compared")
    ap.add_argument("--slower", type=int, default=10, help="slowed runs compared")
    ap.add_argument("--watch", type=float, default=8.0, help="seconds each run is watched")
    ap.add_argument("--gputop", default=None, help="the gputop command (default: -m gputop)")
    ap.add_argument("--job-python", default=sys.executable)
    args = ap.parse_args()
    gputop = [args.gputop] if args.gputop else [sys.executable, "-m", "gputop"]
    with tempfile.TemporaryDirectory(prefix="bench-state-") as state:
        last = run(gputop, args.job_python, 0.0, args.watch, state)
        base = last["run"]["step_s"]
        pad = 0.02 * base * 1000
        print(
            f"base step {1000 * base:.2f} ms over {last['run']['steps']} steps; 2% = {pad:.3f} ms"
        )
        said_same = []
        for _ in range(args.same):  # each unchanged run against the unchanged one before it
            doc = run(gputop, args.job_python, 0.0, args.watch, state)
            print(line("same", doc, last), flush=True)
            said_same.append(not doc["baseline"]["change"]["distinguishable"])
            last = doc
        told = []
        for _ in range(args.slower):  # an unchanged run, then a slowed one against it
            last = run(gputop, args.job_python, 0.0, args.watch, state)
            doc = run(gputop, args.job_python, pad, args.watch, state)
            print(line("slower", doc, last), flush=True)
            c = doc["baseline"]["change"]
            told.append(c["distinguishable"] and c["rel"] > 0)
        print(f"unchanged said unchanged: {sum(said_same)} of {len(said_same)}")
        print(f"2% slowdown told: {sum(told)} of {len(told)}")


if __name__ == "__main__":
    main()
