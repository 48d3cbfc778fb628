"""`gputop` with no command: the live monitor on this machine's GPUs, attached to --pid."""

from __future__ import annotations

import argparse
import sys

from gputop.commands.common import (
    add_ui_flags,
    attach,
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


def run(args: argparse.Namespace) -> int:
    config = ui_config(args)
    attached = attach(args.pid)
    sinks = open_outputs(args, "monitor")
    gpus = open_gpus()
    if gpus.missing:
        print(
            f"gputop: {gpus.missing}. `gputop demo` shows the live monitor on a simulated board "
            "(no GPU needed).",
            file=sys.stderr,
        )
        sinks.close()
        return 1
    return run_tui(gpus, config, new_session(gpus, sinks), attached)
