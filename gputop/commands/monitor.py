"""`gputop` with no command: the live monitor on this machine's GPUs, attached to --pid."""

from __future__ import annotations

import argparse

from gputop.commands.flags import (
    UsageError,
    add_arm_flags,
    add_attach_flag,
    add_gpu_flags,
    add_sim_flags,
    add_ui_flags,
)
from gputop.commands.gpu_source import board_from_flags, follower_for, gpu_choice, open_gpus
from gputop.commands.live_session import new_session, open_armed, open_memory, open_outputs
from gputop.commands.screen import NoTerminal, require_terminal, run_tui, ui_config
from gputop.commands.target import attach
from gputop.errors import CannotDo

NAME = None
"""The bare command: its flags are the top-level parser's."""


EXAMPLES = """\
examples:
  gputop                          the live monitor on this machine's GPUs
  gputop --pid 1234               ... attached to a training process (steps, stacks, verdict)
  gputop --pid 1234 --attach      ... and load the agent into it, no restart
  gputop -1                       print one reading and exit (as gputop snapshot)
  gputop demo                     try it on a simulated board (no GPU needed)

exit status: 0 ok; 1 something to watch is missing (no NVML without --pid, no such PID);
2 a bad flag or value; 127 a command that cannot be started
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--once",
        action="store_true",
        help="(or -1) print one reading and exit, as `gputop snapshot` (nvitop's habit)",
    )
    add_ui_flags(p)
    add_attach_flag(p)
    add_arm_flags(p)
    add_sim_flags(p)
    add_gpu_flags(p)


def run(args: argparse.Namespace) -> int:
    """With a target, GPUs are one input among four: without a driver the screen still shows the
    process, its stacks and steps, and the verdict from them. Without a target there is nothing
    to show but GPUs."""
    if args.once:
        return _once(args)
    config = ui_config(args, terminal=False)  # no driver and no target is said first
    if args.attach and args.pid is None:
        raise UsageError("--attach needs --pid: the process to load the agent into")
    follower = follower_for(args, args.pid)
    board = board_from_flags(args, follower)
    armed = open_armed(args, args.pid)  # --arm without --pid is said before anything opens
    attached = attach(args.pid, getattr(args, "stacks_budget", None))
    sinks = open_outputs(args, "monitor")
    gpus = open_gpus(board, only=gpu_choice(args))
    if gpus.missing and args.pid is None:
        sinks.close()
        raise CannotDo(
            f"{gpus.missing}. `gputop --pid PID` watches a training process without GPUs; "
            "`gputop demo` shows the live monitor on a simulated board (no GPU needed)."
        )
    try:
        require_terminal()
    except NoTerminal:
        gpus.close()
        sinks.close()
        raise
    return run_tui(
        gpus,
        config,
        new_session(gpus, sinks, follower, open_memory(args)),
        attached,
        attach_now=bool(args.attach),
        armed=armed,
    )


def _once(args: argparse.Namespace) -> int:
    """`gputop --once`: the snapshot command over the same target and board."""
    from gputop.commands import snapshot

    if args.attach:
        raise UsageError("--once reads without loading anything: drop --attach")
    flags = {
        k: getattr(args, k) for k in ("pid", "sim_board", "sim_driver", "sim_scenario", "seed")
    }
    return snapshot.run(argparse.Namespace(json=False, timeout=5.0, **flags))
