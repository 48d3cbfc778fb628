"""The principal's first lever against what applying it measures: each scenario runs under
`gputop diagnose -- CMD` as built, then with the lever applied (a flag of the corpus script),
and the estimate gputop gave for the first (its ``saving``, from the budget) is compared with
the time a step saved between the two runs (the typical rank's seconds over its steps, from the
same budget): time saved, not the speed-up ratio, which sits near 1 for a small saving and
would pass any estimate. Issue 50: within a factor of 1.5.

    python tests/bench/bench_lever_savings.py [--seconds 30] [--only NAME,...] [--repeat N]
        [--gputop PATH] [--job-python PATH]

With --repeat N the two run in turn N times each (before, after, before, ...), so a neighbour
or the page cache that slows one stretch of the bench slows both; the step times, the estimate
and its range are each the median of the N, and the spread of the saved time is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "corpus"), str(TESTS)]
from harness import Harness, last_line  # noqa: E402
from scenarios import CORPUS, Scenario, by_name  # noqa: E402

WITHIN = 1.5


@dataclass(frozen=True)
class Lever:
    scenario: str
    applied: tuple[str, ...]
    """The script's flags that apply the lever."""
    what: str
    finding: str = ""
    """The bound whose finding's first lever is applied; empty: the principal's."""


LEVERS = (
    Lever("torchrun_straggler", ("--balanced",), "rank 1 given sequences as long as rank 0's"),
    Lever("eval_every_n", ("--eval-every", "50"), "validation every 50 steps, not 25"),
    Lever("gc_pressure", ("--gc-threshold", "50000,20,20"), "gc.set_threshold(50_000, 20, 20)"),
    Lever("frequent_checkpoints", ("--every", "8"), "a checkpoint every 8 steps, not 4"),
    Lever(
        "rank_without_workers",
        ("--same-workers",),
        "rank 1 given rank 0's num_workers=1",
        finding="straggler",
    ),
    Lever("text_workers", ("--tokenise-ahead",), "token ids made once before training"),
    Lever("epoch_restart", ("--persistent",), "persistent_workers=True"),
)


def diagnose(harness: Harness, s: Scenario, extra: tuple[str, ...], seconds: float) -> dict:
    script = harness.command(s, seconds + 30)
    script = [*script[: script.index("--seconds")], *extra, *script[script.index("--seconds") :]]
    out = subprocess.run(harness.diagnose("--duration", str(seconds), "--", *script),
                         capture_output=True, text=True, timeout=seconds + 120,
                         cwd=CORPUS)  # fmt: skip
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:  # a run that failed: said, and counted as no figure
        print(f"  {s.name} {' '.join(extra)}: no document ({last_line(out.stderr)})")
        return {}


def step_ms(doc: dict) -> float | None:
    """The typical rank's mean step, from the budget gputop showed."""
    of = (doc.get("budget") or {}).get("of") or {}
    return 1e3 * of["seconds"] / of["steps"] if of.get("steps") and of.get("seconds") else None


def estimate_ms(saving: dict, before_ms: float) -> tuple[float, float, float]:
    """(low, mid, high) milliseconds a step the first lever would save, as gputop sized it."""
    mid = saving.get("share", 0.0)
    return (before_ms * saving.get("low", mid), before_ms * mid,
            before_ms * saving.get("high", mid))  # fmt: skip


def finding(doc: dict, bound: str) -> dict:
    """The principal, or the shown finding of ``bound`` (principal or secondary)."""
    v = doc.get("verdict") or {}
    shown = [v.get("principal") or {}, *(v.get("secondary") or ())]
    return next((f for f in shown if not bound or f.get("bound") == bound), {})


def one_pair(
    harness: Harness, lever: Lever, seconds: float
) -> tuple[dict, float | None, float | None]:
    """The finding as gputop showed it on the job as built, and both runs' step times (ms)."""
    s = by_name(lever.scenario)
    before = diagnose(harness, s, (), seconds)
    after = diagnose(harness, s, lever.applied, seconds)
    return finding(before, lever.finding), step_ms(before), step_ms(after)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--only", default="")
    p.add_argument("--repeat", type=int, default=1, help="pairs of runs per lever")
    p.add_argument("--gputop", help="the gputop command to run (an install of its own)")
    p.add_argument("--job-python", help="the Python the jobs run on (another environment)")
    args = p.parse_args()
    harness = Harness(
        gputop=(args.gputop,) if args.gputop else Harness.gputop,
        job_python=args.job_python or Harness.job_python,
    )
    chosen = [x for x in LEVERS if not args.only or x.scenario in args.only.split(",")]
    print(f"{'scenario':20} {'principal':10} {'first lever':44} {'estimate ms':>14} "
          f"{'saved ms':>8} {'ratio':>6}  lever applied")  # fmt: skip
    within = 0
    for lever in chosen:
        pairs = [one_pair(harness, lever, args.seconds) for _ in range(max(1, args.repeat))]
        p_ = pairs[0][0]
        ests, saves, t0s, t1s = [], [], [], []
        for f, t0, t1 in pairs:
            if t0 and t1:
                t0s.append(t0)
                t1s.append(t1)
                saves.append(t0 - t1)
            saving = f.get("saving") or {}
            if saving and t0:  # a run whose finding gave no figure is said, not a zero
                ests.append(estimate_ms(saving, t0))
        t0 = statistics.median(t0s) if t0s else None
        t1 = statistics.median(t1s) if t1s else None
        saved = statistics.median(saves) if saves else None
        low, mid, high = (statistics.median(e[i] for e in ests) if ests else 0.0
                          for i in range(3))  # fmt: skip
        ratio = mid / saved if mid and saved and saved > 0 else None
        ok = ratio is not None and 1 / WITHIN <= ratio <= WITHIN
        within += ok
        first = (p_.get("levers") or ["-"])[0][:44]
        est = f"{low:.1f}-{high:.1f}" if mid else "-"
        print(f"{lever.scenario:20} {p_.get('bound', '-'):10} {first:44} {est:>14} "
              f"{f'{saved:.1f}' if saved is not None else '-':>8} "
              f"{f'{ratio:.2f}' if ratio else '-':>6}  {lever.what}"
              f"{'' if ok else '  (outside 1.5x)'}")  # fmt: skip
        each = ", ".join(f"{x:.1f}" for x in saves)
        shown = ", ".join(f"{f.get('bound', '-')} {'sized' if f.get('saving') else 'unsized'}"
                          for f, _, _ in pairs)  # fmt: skip
        print(f"{'':20} step {t0 or 0:.1f} -> {t1 or 0:.1f} ms; estimate {mid:.1f} ms (from "
              f"{len(ests)} of {len(pairs)} runs: {shown}); saved in each pair {each}")  # fmt: skip
        print(f"{'':20} assumes: {(p_.get('saving') or {}).get('condition', '-')}")
    print(f"\nestimated time saved within {WITHIN}x of the measured: {within} of {len(chosen)}")


if __name__ == "__main__":
    main()
