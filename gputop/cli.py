"""The ``gputop`` entry point: builds the parser from the subcommand registry
(``gputop/commands/``), runs the chosen command, and turns the errors a user can cause (the
``gputop.errors`` family) into one line and their exit status.

Kept free of Textual imports: the colour system must be chosen (environment variables) before
Textual is imported, and headless commands should not pay for it at all.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gputop import version_line
from gputop.commands import MONITOR, SUBCOMMANDS
from gputop.errors import GputopError


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser; each subcommand's own parser is in its ``commands`` attribute (a
    usage error found while running a subcommand is said with that command's usage)."""
    parser = argparse.ArgumentParser(
        prog="gputop",
        description="Attach to a training job and see why it is slow: GPU, host, stacks, steps. "
        "With no command, gputop opens the live monitor on this machine's GPUs.",
        epilog=MONITOR.EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=version_line())
    MONITOR.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    parsers: dict[str | None, argparse.ArgumentParser] = {None: parser}
    for command in SUBCOMMANDS:
        p = sub.add_parser(
            command.NAME,
            help=command.HELP,
            description=command.DESCRIPTION,
            epilog=getattr(command, "EXAMPLES", None),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(p)
        parsers[command.NAME] = p
    parser.set_defaults(parsers=parsers)
    return parser


def once_alias(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """``-1`` means ``--once`` where it stands alone (nvitop's habit). Not an argparse option:
    one that looks like a negative number makes argparse read ``--interval -1`` as a flag
    without its value, and the range error would be lost."""
    takes_value = {
        s for a in parser._actions for s in a.option_strings if a.nargs != 0
    }  # the top level's own: a subcommand's flags come after its name, where -1 is left alone
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--" or (arg in {c.NAME for c in SUBCOMMANDS}):
            return out + argv[i:]
        out.append("--once" if arg == "-1" and (not out or out[-1] not in takes_value) else arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    # gputop itself must never start an agent, even inside a `gputop run` job's environment
    os.environ.pop("GPUTOP_AGENT_AUTOSTART", None)
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # the shell asks what to complete (`gputop completion`)
        from gputop.commands.completion import complete

        complete(parser)  # answers and exits
    args = parser.parse_args(once_alias(list(sys.argv[1:] if argv is None else argv), parser))
    commands = {c.NAME: c for c in SUBCOMMANDS}
    command = commands.get(args.command, MONITOR)
    try:
        return command.run(args)
    except GputopError as e:
        return say_error(e, args.parsers.get(args.command, parser))
    except BrokenPipeError:  # `gputop snapshot | head`
        return 0
    finally:
        _flush_or_drop()


def say_error(error: GputopError, parser: argparse.ArgumentParser) -> int:
    """``error`` as one line on stderr, after ``parser``'s usage when its class asks (argparse
    then exits 2 itself); its class's exit status."""
    line = " ".join(str(error).splitlines())
    if error.with_usage:
        parser.error(line)
    print(f"gputop: {line}", file=sys.stderr)
    return error.exit_status


def _flush_or_drop() -> None:
    """What is left in stdout and stderr goes out now, or, when the terminal or pipe is gone
    (SIGHUP closed it, the reader of a pipe left), to /dev/null: Python's own last flush would
    otherwise fail and turn the exit status into 120, losing the job's status or ours."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                pass
