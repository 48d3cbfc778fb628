"""`gputop watch --pid PID --arm ...`: a job watched without a screen until it ends, a line per
event (the verdict as it changes, each armed capture), the captures written as they fire, and
--exit-on to end with status 3 when a named trigger fired, for a scheduler or a shell loop.

It is `gputop diagnose` run with no end of its own and its lines always on stdout: the same
loop, session, flags and document (``commands/diagnose.py``)."""

from __future__ import annotations

import argparse

from gputop.commands import diagnose

NAME = "watch"
HELP = "watch a job without a screen until it ends: a line per event, armed captures (--arm)"
DESCRIPTION = (
    "Watch a job (--pid PID, or -- CMD) without a screen until it ends or ctrl+c, printing a "
    "line per event on stdout (the verdict as it changes, each armed capture fired, started "
    "and ended) and the findings at the end. With --arm the fitting capture is taken when the "
    "verdict names an event (`gputop docs captures`); with --exit-on the watch ends with "
    "status 3 once a named trigger fired and its captures are written."
)
EXAMPLES = """\
examples:
  gputop watch --pid 1234 --arm                       every trigger, for the night
  gputop watch --pid 1234 --arm straggler,regression --arm-budget-mb 2048
  gputop watch --pid 1234 --exit-on hung || scancel "$SLURM_JOB_ID"
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    diagnose.add_arguments(p, duration=float("inf"))


def run(args: argparse.Namespace) -> int:
    if not args.pid and not diagnose.command_of(args):
        raise diagnose.UsageError("watch needs a job: --pid PID or a command after --")
    args.lines = True
    return diagnose.run(args)
