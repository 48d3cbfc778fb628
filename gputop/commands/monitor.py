"""`gputop` with no command: the live monitor on this machine's GPUs, attached to --pid."""

from __future__ import annotations

import argparse
import sys

from gputop.commands.common import (
    UsageError,
    add_attach_flag,
    add_sim_flags,
    add_ui_flags,
    attach,
    board_from_flags,
    follower_for,
    new_session,
    open_gpus,
    open_outputs,
    run_tui,
    ui_config,
)

NAME = None
"""The bare command: its flags are the top-level parser's."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_ui_flags(p)
    add_attach_flag(p)
    add_sim_flags(p)


def run(args: argparse.Namespace) -> int:
    """With a target, GPUs are one input among four: without a driver the screen still shows the
    process, its stacks and steps, and the verdict from them. Without a target there is nothing
    to show but GPUs."""
    config = ui_config(args)
    if args.attach and args.pid is None:
        raise UsageError("--attach needs --pid: the process to load the agent into")
    follower = follower_for(args, args.pid)
    board = board_from_flags(args, follower)
    attached = attach(args.pid)
    sinks = open_outputs(args, "monitor")
    gpus = open_gpus(board)
    if gpus.missing and args.pid is None:
        print(
            f"gputop: {gpus.missing}. `gputop --pid PID` watches a training process without "
            "GPUs; `gputop demo` shows the live monitor on a simulated board (no GPU needed).",
            file=sys.stderr,
        )
        sinks.close()
        return 1
    return run_tui(
        gpus, config, new_session(gpus, sinks, follower), attached, attach_now=bool(args.attach)
    )
