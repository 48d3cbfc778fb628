"""Repeated runs of the corpus, kept and compared: each run of a scenario in a mode as one JSON
line (``save``), read back (``load``), and two tables over them: how far the same scenario's
readings spread across runs of one build (``spread_table``: its finals, each slice's lowest and
highest share in points), gputop's shares against the job's own clocks run by run
(``truth_table``), and one build's finals beside another's (``compare_table``: the
behaviour a refactoring must keep, the scenarios' known spread aside).

A run is kept whole enough to be judged again later (final, timeline, budget, cause) and small
enough that a whole corpus in five runs is a few hundred kilobytes."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from harness import Result

SPREAD_MAX = 0.05
"""Points a slice may move across runs of one scenario (issue 52: within 5 points)."""
TRUTH_MAX = 0.05
"""Points gputop's share of a slice may differ from the job's own clocks' (issue 52)."""


def row(r: Result, label: str, run: int) -> dict:
    """One run as a JSON line: the build's ``label`` and the run's number."""
    return {
        "label": label,
        "run": run,
        "scenario": r.scenario.name,
        "mode": r.mode,
        "final": r.final,
        "problem": r.problem,
        "right": r.final in r.scenario.expected,
        "expected": sorted(r.scenario.expected),
        "first_right_s": r.first_right_s,
        "changes_after": r.changes_after,
        "timeline": [list(t) for t in r.timeline],
        "budget": r.budget,
        "truth": r.truth,
        "against": [list(e) for e in r.errors()] if r.truth is not None else None,
        "source": r.source,
        "cause": r.cause,
    }


def save(path: Path, rows: Iterable[dict]) -> None:
    """Appends the runs (a bench stopped half-way keeps what it measured)."""
    with path.open("a", encoding="utf-8") as f:
        for one in rows:
            f.write(json.dumps(one) + "\n")


def load(paths: Sequence[Path]) -> list[dict]:
    """Every run in the files, in order; a line that is not a run is said and skipped."""
    out = []
    for path in paths:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                one = json.loads(line)
            except ValueError:
                print(f"{path}:{n}: not a JSON line, skipped")
                continue
            if isinstance(one, dict) and {"scenario", "mode", "final"} <= one.keys():
                out.append(one)
    return out


def _by_case(runs: Iterable[dict]) -> dict[tuple[str, str], list[dict]]:
    cases: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for one in runs:
        cases[(one["scenario"], one["mode"])].append(one)
    return cases


def _finals(runs: Sequence[dict]) -> str:
    counted = Counter(one["final"] or f"({one['problem'] or 'none'})" for one in runs)
    return ", ".join(f"{name} x{n}" if n > 1 else name for name, n in counted.most_common())


def spreads(runs: Sequence[dict]) -> dict[str, tuple[float, float]]:
    """Each slice's (lowest, highest) share over the runs that have a budget."""
    budgets = [one["budget"] for one in runs if one.get("budget")]
    names = sorted({n for b in budgets for n in b})
    return {n: (min(b.get(n, 0.0) for b in budgets), max(b.get(n, 0.0) for b in budgets))
            for n in names}  # fmt: skip


def spread_table(runs: Sequence[dict]) -> list[str]:
    """Per scenario and mode: the finals of its runs, and each slice that moved with its range
    in points (slices under 1% in every run left out); then the counts the issue asks for."""
    out = [f"{'scenario':26} {'mode':8} {'runs':>4}  finals  |  slices: lowest-highest (spread)"]
    steady = within = cases = 0
    for (name, mode), runs_ in sorted(_by_case(runs).items()):
        cases += 1
        finals = {one["final"] for one in runs_}
        steady += len(finals) == 1
        ranges = {n: lo_hi for n, lo_hi in spreads(runs_).items() if lo_hi[1] >= 0.01}
        worst = max((hi - lo for lo, hi in ranges.values()), default=0.0)
        within += worst <= SPREAD_MAX
        cells = "  ".join(f"{n} {round(100 * lo)}-{round(100 * hi)} ({round(100 * (hi - lo))})"
                          for n, (lo, hi) in ranges.items())  # fmt: skip
        out.append(f"{name:26} {mode:8} {len(runs_):>4}  {_finals(runs_)}  |  {cells}")
    out.append("")
    out.append(f"one final verdict in every run: {steady} of {cases}")
    out.append(f"every slice within {round(100 * SPREAD_MAX)} points across runs: {within} of "
               f"{cases}")  # fmt: skip
    return out


def compare_table(before: Sequence[dict], after: Sequence[dict]) -> list[str]:
    """Per scenario and mode, the finals of each build's runs; a case whose finals differ is
    marked (``same`` when the sets of finals are equal, ``moved`` otherwise), with how many
    runs were right in each."""
    b, a = _by_case(before), _by_case(after)
    out = [f"{'scenario':26} {'mode':8} {'right':>9}  before  ->  after"]
    same = 0
    cases = sorted(set(b) | set(a))
    for case in cases:
        rb, ra = b.get(case, []), a.get(case, [])
        alike = {x["final"] for x in rb} == {x["final"] for x in ra}
        same += alike
        right = f"{sum(x['right'] for x in rb)}/{len(rb)}->{sum(x['right'] for x in ra)}/{len(ra)}"
        mark = "same " if alike else "MOVED"
        out.append(f"{case[0]:26} {case[1]:8} {right:>9}  {mark} {_finals(rb) or '-'}  ->  "
                   f"{_finals(ra) or '-'}")  # fmt: skip
    out.append("")
    out.append(f"the same finals before and after: {same} of {len(cases)}")
    out.append(f"right at the end: before {sum(x['right'] for x in before)} of {len(before)}, "
               f"after {sum(x['right'] for x in after)} of {len(after)}")  # fmt: skip
    return out


def truth_table(runs: Sequence[dict]) -> list[str]:
    """Per scenario and mode with the job's own clocks, each slice: the clocks' share and
    gputop's in every run ("clocks/gputop" in whole percent), the worst difference in points
    (marked past TRUTH_MAX); then how many cases hold every slice within it in every run."""
    out = [f"{'scenario':26} {'mode':8} {'slice':10} clocks/gputop per run  (worst, points)"]
    cases = within = 0
    for (name, mode), runs_ in sorted(_by_case(runs).items()):
        timed = [one for one in runs_ if one.get("against")]
        if not timed:
            continue
        cases += 1
        slices = dict.fromkeys(n for one in timed for n, _, _ in one["against"])
        worst_case = 0.0
        for n in slices:
            pairs = [next(((c, g) for m, c, g in one["against"] if m == n), (0.0, 0.0))
                     for one in timed]  # fmt: skip
            worst = max(abs(g - c) for c, g in pairs)
            worst_case = max(worst_case, worst)
            cells = " ".join(f"{round(100 * c)}/{round(100 * g)}" for c, g in pairs)
            mark = "  OVER" if worst > TRUTH_MAX else ""
            out.append(f"{name:26} {mode:8} {n:10} {cells}  ({round(100 * worst)}){mark}")
        within += worst_case <= TRUTH_MAX
    out.append("")
    out.append(f"every slice within {round(100 * TRUTH_MAX)} points of the job's clocks in "
               f"every run: {within} of {cases}")  # fmt: skip
    return out
