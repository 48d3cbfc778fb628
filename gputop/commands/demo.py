"""`gputop demo`: the live monitor on a simulated board, optionally attached to the example
trainer, whose phases the simulated GPUs then follow."""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
from typing import TYPE_CHECKING

from gputop.commands.flags import UsageError, add_gpu_flags, add_ui_flags
from gputop.commands.gpu_source import Board, gpu_choice, open_gpus
from gputop.commands.live_session import new_session, open_outputs
from gputop.commands.screen import run_tui, ui_config
from gputop.commands.target import attach
from gputop.errors import CannotDo

if TYPE_CHECKING:
    from gputop.run import Job

NAME = "demo"
HELP = "the live monitor on a simulated board (no GPU needed)"
DESCRIPTION = "Run the live monitor against a simulated board with a scripted workload."


EXAMPLES = """\
examples:
  gputop demo                                 8 simulated H100s, a different workload each
  gputop demo --board a100x4 --scenario power-throttled
  gputop demo --trainer '--workers 0 --slow-transform-ms 50'   a real CPU trainer, attached
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from gputop.sim import BOARDS, DRIVERS, SCENARIOS

    p.add_argument(
        "--board",
        default="h100x8",
        help=f"simulated board: {', '.join(sorted(BOARDS))} with an optional count "
        "and -mig (default h100x8)",
    )
    p.add_argument(
        "--scenario",
        default="mixed",
        help=f"workload: {', '.join(SCENARIOS)} (default mixed: a different one per GPU)",
    )
    p.add_argument(
        "--driver",
        default=None,
        help=f"simulated driver generation: {', '.join(DRIVERS)} (default: the driver of the "
        "board's real capture)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated board's noise")
    p.add_argument(
        "--trainer",
        metavar="KNOBS",
        help="also run the example MLP trainer with these knobs (quoted, e.g. "
        "'--workers 0 --slow-transform-ms 50'; see examples/README.md) and attach to it: the "
        "simulated GPU then follows its phases",
    )
    add_gpu_flags(p)
    add_ui_flags(p, under_command=True)


def run(args: argparse.Namespace) -> int:
    if args.trainer is not None and importlib.util.find_spec("torch") is None:
        raise CannotDo(
            f"--trainer runs a PyTorch trainer and {sys.executable} has no torch: "
            "pip install 'gputop[torch]' (a CPU build is enough), or drop --trainer"
        )
    Board(args.board, args.driver, args.scenario, args.seed).checked()  # before the screen
    config = ui_config(args)
    sinks = open_outputs(args, "demo")
    job = follower = None
    scenario = args.scenario
    pid = getattr(args, "pid", None)
    if args.trainer is not None:
        from gputop.resources import bundled_examples_dir
        from gputop.run import Job
        from gputop.sim.scenarios import PhaseFollower

        script = bundled_examples_dir() / "mlp_train.py"
        try:
            knobs = shlex.split(args.trainer)  # a list for exec: no shell is involved
        except ValueError as e:
            sinks.close()
            raise UsageError(f"--trainer {args.trainer!r}: {e}") from None
        job = Job([sys.executable, str(script), "--steps", "100000000", *knobs], owned=True)
        job.forward_signals()
        pid = job.pid
        follower = PhaseFollower()
        scenario = follower.scenario()
    try:
        attached = attach(pid)
        board = Board(args.board, args.driver, scenario, args.seed, 120.0, short_label=True)
        gpus = open_gpus(board, only=gpu_choice(args))
        code = run_tui(gpus, config, new_session(gpus, sinks, follower), attached, job=job)
        return _trainer_ended(job) if job is not None else code
    except BaseException:
        sinks.close()  # nothing was recorded: an unstarted recorder leaves no file
        raise
    finally:
        if job is not None and job.poll() is None:
            job.stop()


def _trainer_ended(job: Job) -> int:
    """After the screen: a trainer that ended by itself says why (its last lines) and the
    demo exits with its status; one still running is stopped by the caller (exit 0)."""
    from gputop.run import exit_status

    status = job.poll()
    if status is None:
        return 0
    code = exit_status(status)
    tail = job.tail(10)
    if tail:
        print(tail, file=sys.stderr)
    print(f"gputop: the trainer exited with status {code}; its output: {job.log_path}",
          file=sys.stderr)  # fmt: skip
    return code or 0
