"""`gputop compare A B`: two recordings of a job, B against A (docs/compare.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gputop.commands.flags import UsageError, json_help
from gputop.errors import CannotDo

NAME = "compare"
HELP = "two recordings of a job side by side: did the change help, by how much, which slice"
DESCRIPTION = (
    "Compare recording B with recording A: the mean step with an interval that holds for "
    "correlated steps, the slices that moved, the settings and arguments that changed, the "
    "lever A offered when B changed its knob, and the verdicts of both."
)
EXAMPLES = """\
examples:
  gputop compare before.gputop after.gputop           as text
  gputop compare before.gputop after.gputop --json    the same as JSON
  gputop compare a.gputop b.gputop --html diff.html   one page (offline), readable by you only
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", type=Path, metavar="A", help="the recording before")
    p.add_argument("b", type=Path, metavar="B", help="the recording after")
    p.add_argument("--json", action="store_true", help=json_help("compare"))
    p.add_argument("--html", type=Path, metavar="PAGE",
                   help="write the comparison as one HTML page to PAGE")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from gputop.record.comparison import build_comparison, render_comparison
    from gputop.record.reader import open_recording
    from gputop.record.recorded_run import recorded_run

    if args.html is not None and args.json:
        raise UsageError("--html writes a page and --json prints JSON: give one of them")
    a, b = open_recording(args.a), open_recording(args.b)
    doc = build_comparison(str(args.a), recorded_run(a), str(args.b), recorded_run(b))
    if args.html is not None:
        from gputop.render.compare_page import compare_page
        from gputop.snapshot import write_private_text

        try:
            write_private_text(args.html, compare_page(doc))
        except OSError as e:
            raise CannotDo(f"cannot write {args.html}: {e.strerror or e}; give a path in a "
                           "folder you can write") from None  # fmt: skip
        print(f"gputop: the comparison is in {args.html}")
    elif args.json:
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render_comparison(doc))
    for path, rec in ((args.a, a), (args.b, b)):
        if rec.damage:
            print(f"gputop: {path} {rec.damage}", file=sys.stderr)
    return 1 if a.bad or b.bad else 0
