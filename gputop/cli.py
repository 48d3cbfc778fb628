"""The ``gputop`` entry point: builds the parser from the subcommand registry
(``gputop/commands/``), runs the chosen command, and turns the errors a user can cause into one
line and an exit code.

Kept free of Textual imports: the colour system must be chosen (environment variables) before
Textual is imported, and headless commands should not pay for it at all.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gputop import __version__
from gputop.commands import MONITOR, SUBCOMMANDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputop",
        description="Attach to a training job and see why it is slow: GPU, host, stacks, steps. "
        "With no command, gputop opens the live monitor on this machine's GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"gputop {__version__}")
    MONITOR.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in SUBCOMMANDS:
        p = sub.add_parser(command.NAME, help=command.HELP, description=command.DESCRIPTION)
        command.add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # gputop itself must never start an agent, even inside a `gputop run` job's environment
    os.environ.pop("GPUTOP_AGENT_AUTOSTART", None)
    parser = build_parser()
    args = parser.parse_args(argv)
    from gputop.commands.common import UsageError
    from gputop.record.fileformat import RecordingError
    from gputop.sim import SimConfigError
    from gputop.sinks import SinkError
    from gputop.sources.target import TargetNotFound

    commands = {c.NAME: c for c in SUBCOMMANDS}
    command = commands.get(args.command, MONITOR)
    try:
        return command.run(args)
    except (SimConfigError, UsageError) as e:
        parser.error(str(e))
    except (SinkError, RecordingError) as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 2
    except TargetNotFound as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `gputop snapshot | head`
        return 0
