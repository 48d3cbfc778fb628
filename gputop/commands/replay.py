"""`gputop replay FILE`: a recording in the live screen (pause, seek, speed), or with --check
every recorded verdict recomputed from the recorded readings and compared."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gputop.commands.flags import add_ui_flags
from gputop.commands.screen import ui_config

NAME = "replay"
HELP = "the live screen over a recording, with pause, seek and speed keys"
DESCRIPTION = "Play a recording in the live monitor's screen."


EXAMPLES = """\
examples:
  gputop replay run.gputop                    the screen over a recording (space pauses)
  gputop replay run.gputop --speed 4          four times as fast
  gputop replay run.gputop --check            recompute every verdict and compare (CI)
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="a recording (--record FILE)")
    p.add_argument("--speed", type=float, default=1.0, help="playback speed (default 1)")
    p.add_argument(
        "--check",
        action="store_true",
        help="recompute every verdict from the recorded readings, compare, and exit",
    )
    add_ui_flags(p, under_command=True, live=False)


def run(args: argparse.Namespace) -> int:
    from gputop.record.reader import open_recording
    from gputop.record.replay import check

    recording = open_recording(args.file)
    if args.check:
        result = check(recording)
        print(result.text())
        return 0 if result.ok and not recording.bad else 1
    config = ui_config(args)
    from gputop.ui.terminal import apply_terminal_env

    apply_terminal_env(config.color, config.low_bandwidth)
    from gputop.ui.replay_app import run_replay

    code = run_replay(recording, config, speed=args.speed)
    if recording.bad:  # played up to the damage, which the status line said
        print(f"gputop: {args.file} {recording.damage}", file=sys.stderr)
        return 1
    return code
