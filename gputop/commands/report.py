"""`gputop report FILE`: a recording summarised to read or paste (text with charts, or JSON:
docs/report.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gputop.commands.flags import UsageError, json_help
from gputop.errors import CannotDo

NAME = "report"
HELP = "a summary of a recording to read or paste: verdicts, steps, GPUs, findings"
DESCRIPTION = (
    "Summarise a recording: time per verdict, step times and phases, MFU, throttling, ranks, "
    "findings with levers, captures, charts."
)


EXAMPLES = """\
examples:
  gputop report run.gputop                    verdicts, steps, GPUs and findings as text
  gputop report run.gputop --json             the same as JSON
  gputop report run.gputop --html run.html    one page with charts to keep or share (offline)
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="a recording (--record FILE)")
    p.add_argument(
        "--json",
        action="store_true",
        help=json_help("report"),
    )
    p.add_argument("--no-charts", action="store_true", help="leave out the charts")
    p.add_argument(
        "--html",
        type=Path,
        metavar="PAGE",
        help="write the report as one self-contained HTML page (charts, findings, captures; "
        "opens offline, loads nothing) to PAGE, readable by you only",
    )


def run(args: argparse.Namespace) -> int:
    from gputop.record.reader import open_recording
    from gputop.record.report import build_report, render_report

    if args.html is not None and args.json:
        raise UsageError("--html writes a page and --json prints JSON: give one of them")
    recording = open_recording(args.file)
    doc = build_report(recording)
    if args.html is not None:
        _write_page(args.html, doc, not args.no_charts)
        print(f"gputop: the report of {args.file} is in {args.html}")
    elif args.json:
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render_report(doc, charts=not args.no_charts))
    if recording.damage:
        print(f"gputop: {args.file} {recording.damage}", file=sys.stderr)
    return 1 if recording.bad else 0  # reported up to the damage, which the line says


def _write_page(path: Path, doc: dict[str, Any], with_charts: bool) -> None:
    """The page, whole or not at all, 0600, never through a link planted at ``path``."""
    from gputop.render.report_page import report_page
    from gputop.snapshot import write_private_text

    page = report_page(doc, with_charts)
    try:
        write_private_text(path, page)
    except OSError as e:
        raise CannotDo(f"cannot write {path}: {e.strerror or e}; give a path in a folder you "
                       "can write") from None  # fmt: skip
