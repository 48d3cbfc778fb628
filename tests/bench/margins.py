"""Each live verdict test's margin, from the timelines a run wrote with ``GPUTOP_MARGINS``:
how long its final verdict held before the watch ended, and when it was first shown. A test
whose final verdict came late in its watch is one a busier machine may fail; its margin is
what its docstring states.

    GPUTOP_MARGINS=/tmp/margins.jsonl pytest tests/integration/test_diagnose_scenarios.py
    python tests/bench/margins.py /tmp/margins.jsonl [more.jsonl ...]

With several files (runs), each test's smallest margin is printed beside its median."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def held_from(timeline: list[dict[str, object]]) -> float | None:
    """When the final verdict began to hold (the last change), None with no verdict."""
    if not timeline or timeline[-1].get("bound") is None:
        return None
    t = timeline[-1].get("t_s")
    return float(t) if isinstance(t, int | float) else None


def margins(paths: list[Path]) -> dict[str, list[tuple[float | None, str | None]]]:
    """Per test, (margin in seconds, final verdict) of each run."""
    out: dict[str, list[tuple[float | None, str | None]]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if "figure" in e:  # a measured figure and its bound (figures())
                continue
            start = held_from(e["timeline"])
            final = e["timeline"][-1]["bound"] if e["timeline"] else None
            margin = e["watched_s"] - start if start is not None else None
            out.setdefault(e["test"], []).append((margin, final))
    return out


def figures(paths: list[Path]) -> dict[tuple[str, str], tuple[list[float], float]]:
    """Per (test, figure): each run's value, and the bound the test holds it to."""
    out: dict[tuple[str, str], tuple[list[float], float]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if "figure" in e:
                out.setdefault((e["test"], e["figure"]), ([], e["bound"]))[0].append(e["value"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    files = ap.parse_args().files
    by_test = margins(files)
    rows = []
    for test, runs in by_test.items():
        known = [m for m, _ in runs if m is not None]
        least = min(known) if known else None
        finals = ",".join(sorted({str(f) for _, f in runs}))
        rows.append((least if least is not None else -1.0, test, known, finals, len(runs)))
    print(f"{'least s':>8} {'median s':>9} {'runs':>5}  final  test")
    for least, test, known, finals, n in sorted(rows):
        med = f"{statistics.median(known):.1f}" if known else "-"
        print(f"{least:>8.1f} {med:>9} {n:>5}  {finals}  {test}")
    for (test, name), (values, bound) in sorted(figures(files).items()):
        print(f"worst {max(values):g} of bound {bound:g} over {len(values)} runs: {name}  {test}")


if __name__ == "__main__":
    main()
