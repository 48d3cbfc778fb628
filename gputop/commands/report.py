"""`gputop report FILE`: a recording summarised to read or paste (text with charts, or JSON:
docs/report.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gputop.commands.flags import json_help

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


def run(args: argparse.Namespace) -> int:
    from gputop.record.reader import open_recording
    from gputop.record.report import build_report, render_report

    recording = open_recording(args.file)
    doc = build_report(recording)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render_report(doc, charts=not args.no_charts))
    if recording.damage:
        print(f"gputop: {args.file} {recording.damage}", file=sys.stderr)
    return 1 if recording.bad else 0  # reported up to the damage, which the line says
