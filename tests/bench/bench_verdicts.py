"""The verdict against scripts written elsewhere: every script of tests/corpus/ run both ways,
started by `gputop diagnose -- CMD` and started plainly then attached by PID (`gputop diagnose
--pid P --attach`), each on a simulated H100 that follows the job (busy while it computes).

One table: scenario, launcher, mode, expected, the final principal, seconds to the first
verdict shown at all, seconds to the first right verdict (counted from the scenario's onset when
its cause starts later, such as a hang after --stuck-after), how often the principal changed
after it, and any bound the scenario must never be given (a slow job called hung); then the
accuracy and the median time to a right verdict.

    python tests/bench/bench_verdicts.py [--only NAME[,NAME...]] [--mode run|attached|both]
                                         [--seconds 40] [--repeat N] [--save RUNS.jsonl]
                                         [--label NAME]

``--repeat N`` runs the corpus N times over (each scenario's runs apart in time) and prints,
after the table of every run, how far each scenario's readings spread across the runs
(``tests/corpus/runs.py``). ``--save`` appends each run as a JSON line as it ends, labelled with
``--label`` (a build's name); `tests/bench/bench_compare_runs.py` sets two labels side by side.

Scenarios run one after another: they are judged on what they do with the CPU, so two at once
on a small machine would change each other's verdicts (there is no --jobs).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "corpus"), str(TESTS)]
from harness import NO_CAUSE, Harness, Result, progress, unfit  # noqa: E402
from runs import row, save, spread_table, truth_table  # noqa: E402
from scenarios import SCENARIOS  # noqa: E402


def _s(t: float | None) -> str:
    return f"{t:.1f} s" if t is not None else "never"


def table(results: list[Result]) -> str:
    head = f"{'scenario':26} {'launcher':27} {'mode':8} {'expected':44} {'final':24} "
    head += f"{'shown at':>8} {'right at':>8} {'changes':>7} {'refined':>7} {'budget':7} "
    head += f" {'never-bound seen':16} cause (ok: the one it is built with)"
    lines = [
        "shown at: first verdict naming a bound, seconds after gputop started; right at: first",
        "right verdict, seconds after max(gputop's start, the scenario's onset). The onset is",
        "on the script's clock, which starts after its imports (1-3 s after the process): a",
        "verdict can look that much faster than it was. changes: of what is shown, after the",
        "first right verdict; refined: of those, a right bound followed by a right variant of",
        "it (data-input, then data-input/io), not counted as changes. budget: where the job's",
        "step-time budget came from at the end (agent: the agent ran in the job).",
        "",
        head,
        "-" * len(head),
    ]
    for r in results:
        lines.append(
            f"{r.scenario.name:26} {r.scenario.launcher:27} {r.mode:8} "
            f"{'|'.join(sorted(r.scenario.expected)):44} {r.final or r.problem or '-':24} "
            f"{_s(r.first_shown_s):>8} {_s(r.first_right_s):>8} {r.changes_after:>7} "
            f"{r.refined:>7} {r.source or '-':7}  "
            f"{','.join(r.never_seen) or '-':16} {_cause_cell(r)}"
        )
    ok = [r for r in results if r.final in r.scenario.expected]
    times = [r.first_right_s for r in results if r.first_right_s is not None]
    lines.append("")
    lines.append(f"right at the end: {len(ok)} of {len(results)}")
    if times:
        lines.append(f"median time to a right verdict: {statistics.median(times):.1f} s")
    misfits = [r for r in results if unfit(r)]
    lines.append(f"runs offered a lever for a setup the job lacks: {len(misfits)}")
    for r in misfits:
        lines.append(f"  {r.scenario.name} {r.mode}: {'; '.join(unfit(r))}")
    risky = [r for r in results if r.risk_right is not None]
    if risky:
        said = sum(1 for r in risky if r.risk_right)
        lines.append(f"risk line names the built risk: {said} of {len(risky)}")
        lines += [f"  {r.scenario.name} {r.mode}: {'; '.join(r.risks) or 'no risk said'}"
                  for r in risky]  # fmt: skip
    losses = [r for r in results if r.final and r.final not in NO_CAUSE]
    named = sum(1 for r in losses if r.cause)
    lines.append(f"a cause line under a final principal that is a loss: {named} of {len(losses)}")
    lines += [f"  no cause: {r.scenario.name} {r.mode} ({r.final})" for r in losses if not r.cause]
    stated = [r for r in results if r.cause_right is not None]
    if stated:
        right = sum(1 for r in stated if r.cause_right)
        lines.append(f"cause line names the built cause: {right} of {len(stated)}")
    bad = [r for r in results if r.never_seen]
    if bad:
        lines.append(f"runs given a bound they must never get: {len(bad)}")
    return "\n".join(lines + budget_table(results))


def _cause_cell(r: Result) -> str:
    mark = {True: "ok: ", False: "WRONG: ", None: ""}[r.cause_right]
    return f"{mark}{r.cause or '-'}"


BUDGET_ERROR = 0.10
"""Points a measured slice may differ from its designed share (issue 25: within 10)."""


def budget_table(results: list[Result]) -> list[str]:
    """Designed against measured shares, slice by slice, for the scenarios that state them."""
    rows = [r for r in results if r.scenario.shares and r.truth is None]
    if not rows:
        return []
    out = [
        "",
        "step-time budget: designed / measured (% of wall time), error in points, for",
        "the scenarios that keep no clocks of their own",
        "",
    ]
    within = 0
    for r in rows:
        errs = r.errors()
        worst = max((abs(m - d) for _, d, m in errs), default=0.0)
        within += r.budget is not None and worst <= BUDGET_ERROR
        cells = "  ".join(f"{n} {round(100 * d)}/{round(100 * m)} ({100 * (m - d):+.0f})"
                          for n, d, m in errs)  # fmt: skip
        rest = ""
        if r.budget:
            compute = r.budget.get("compute", 0.0)
            rest = f"  compute {round(100 * compute)}"
        seen = cells if r.budget is not None else "no budget"
        lines_ = f"{r.scenario.name:26} {r.mode:8} {seen}{rest}"
        out.append(lines_)
    out.append("")
    out.append(f"every designed slice within {round(100 * BUDGET_ERROR)} points: {within} of "
               f"{len(rows)}")  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="scenario names, comma-separated")
    ap.add_argument("--mode", choices=("run", "attached", "both"), default="both")
    ap.add_argument("--seconds", type=float, default=40.0, help="how long gputop watches each")
    ap.add_argument("--gputop", help="the gputop command to run (an install of its own); "
                    "default: this Python's -m gputop")  # fmt: skip
    ap.add_argument("--job-python", help="the Python the jobs run on (another environment)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of the whole corpus")
    ap.add_argument("--save", type=Path, help="append each run to this JSON-lines file")
    ap.add_argument("--label", default="", help="the build's name in the saved runs")
    args = ap.parse_args()
    if args.repeat < 1:
        raise SystemExit("--repeat takes 1 or more")
    harness = Harness(
        gputop=(args.gputop,) if args.gputop else Harness.gputop,
        job_python=args.job_python or Harness.job_python,
    )
    names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    unknown = sorted(set(names or ()) - {s.name for s in SCENARIOS})
    if unknown:
        known = ", ".join(s.name for s in SCENARIOS)
        raise SystemExit(f"no scenario {', '.join(unknown)}: {known}")
    chosen = [s for s in SCENARIOS if names is None or s.name in names]
    results: list[Result] = []
    kept: list[dict] = []
    for run in range(1, args.repeat + 1):
        for s in chosen:
            for mode in ("run", "attached"):
                if args.mode not in (mode, "both"):
                    continue
                go = harness.run_mode if mode == "run" else harness.attached_mode
                results.append(go(s, args.seconds))
                print(progress(results[-1]), file=sys.stderr, flush=True)
                kept.append(row(results[-1], args.label, run))
                if args.save:
                    save(args.save, kept[-1:])
            if s.memory_mib:
                harness.remove_cgroups()
    print(table(results))
    if any(r.truth is not None for r in results):
        print("\nagainst the job's own clocks:\n")
        print("\n".join(truth_table(kept)))
    if args.repeat > 1:
        print("\nacross the runs:\n")
        print("\n".join(spread_table(kept)))


if __name__ == "__main__":
    main()
