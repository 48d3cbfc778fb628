"""The principal's first lever against what applying it measures: each scenario runs under
`gputop diagnose -- CMD` as built, then with the lever applied (a flag of the corpus script),
and the estimate gputop gave for the first (its ``saving``, from the budget) is compared with
the steps per second the two runs measured (the typical rank's steps over its window's
seconds, from the same budget). Issue 38: within a factor of 1.5.

    python tests/bench/bench_lever_savings.py [--seconds 30] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_verdicts as bv

WITHIN = 1.5


@dataclass(frozen=True)
class Lever:
    scenario: str
    applied: tuple[str, ...]
    """The script's flags that apply the lever."""
    what: str


LEVERS = (
    Lever("torchrun_straggler", ("--balanced",), "rank 1 given sequences as long as rank 0's"),
    Lever("eval_every_n", ("--eval-every", "50"), "validation every 50 steps, not 25"),
    Lever("gc_pressure", ("--gc-threshold", "50000,20,20"), "gc.set_threshold(50_000, 20, 20)"),
)


def diagnose(s: bv.Scenario, extra: tuple[str, ...], seconds: float) -> dict:
    script = bv.command(s, seconds + 30)
    script = [*script[: script.index("--seconds")], *extra, *script[script.index("--seconds") :]]
    out = subprocess.run(bv.gputop("--duration", str(seconds), "--", *script),
                         capture_output=True, text=True, timeout=seconds + 120,
                         cwd=bv.CORPUS)  # fmt: skip
    return json.loads(out.stdout)


def rate(doc: dict) -> float | None:
    of = (doc.get("budget") or {}).get("of") or {}
    return of["steps"] / of["seconds"] if of.get("steps") and of.get("seconds") else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--only", default="")
    args = p.parse_args()
    chosen = [x for x in LEVERS if not args.only or x.scenario in args.only.split(",")]
    print(f"{'scenario':20} {'principal':10} {'first lever':44} {'estimate':>8} {'measured':>8} "
          f"{'ratio':>6}  lever applied")  # fmt: skip
    within = 0
    for lever in chosen:
        s = bv.by_name(lever.scenario)
        before = diagnose(s, (), args.seconds)
        after = diagnose(s, lever.applied, args.seconds)
        p_ = before["verdict"]["principal"] or {}
        saving = p_.get("saving") or {}
        est = saving.get("speedup")
        r0, r1 = rate(before), rate(after)
        measured = r1 / r0 if r0 and r1 else None
        ratio = est / measured if est and measured else None
        ok = ratio is not None and 1 / WITHIN <= ratio <= WITHIN
        within += ok
        first = (p_.get("levers") or ["-"])[0][:44]
        print(f"{lever.scenario:20} {p_.get('bound', '-'):10} {first:44} "
              f"{f'{est:.2f}x' if est else '-':>8} {f'{measured:.2f}x' if measured else '-':>8} "
              f"{f'{ratio:.2f}' if ratio else '-':>6}  {lever.what}"
              f"{'' if ok else '  (outside 1.5x)'}")  # fmt: skip
        print(f"{'':20} steps/s {r0 or 0:.1f} -> {r1 or 0:.1f}; assumes: "
              f"{saving.get('condition', '-')}")  # fmt: skip
    print(f"\nestimate within {WITHIN}x of the measured change: {within} of {len(chosen)}")


if __name__ == "__main__":
    main()
