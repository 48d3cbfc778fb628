"""Two builds' corpus runs side by side: the runs `bench_verdicts.py --save F --label L` kept,
one label before and one after a change (a refactoring must keep every scenario's finals,
within the spread its own runs show).

    python tests/bench/bench_compare_runs.py RUNS.jsonl [MORE.jsonl ...] --before A --after B

Prints each build's spread across its runs, then the finals of both per scenario and mode."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "corpus"), str(TESTS)]
from runs import compare_table, load, spread_table  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--before", required=True, help="the label of the runs before")
    ap.add_argument("--after", required=True, help="the label of the runs after")
    args = ap.parse_args()
    missing = [str(f) for f in args.files if not f.is_file()]
    if missing:
        raise SystemExit(f"no such file: {', '.join(missing)}")
    runs = load(args.files)
    before = [r for r in runs if r.get("label") == args.before]
    after = [r for r in runs if r.get("label") == args.after]
    for label, some in ((args.before, before), (args.after, after)):
        if not some:
            labels = sorted({str(r.get("label")) for r in runs})
            raise SystemExit(f"no runs labelled {label!r}: the files hold {', '.join(labels)}")
        print(f"{label}: {len(some)} runs, across them:\n")
        print("\n".join(spread_table(some)) + "\n")
    print("\n".join(compare_table(before, after)))


if __name__ == "__main__":
    main()
