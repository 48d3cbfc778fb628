"""`gputop completion SHELL`: the shell code that completes gputop's commands, flags and values
(and, after -p/--pid, the Python processes this user runs), from the same parser --help shows.

argcomplete writes it: it completes from the argparse parser itself, so a new flag completes
with no script to regenerate, and it knows bash, zsh and fish (shtab writes static scripts but
has no fish). The shell runs gputop to complete; ``cli.main`` answers before any source opens.
"""

from __future__ import annotations

import argparse
import sys

NAME = "completion"
HELP = "print the shell code that completes gputop's commands, flags and PIDs"
SHELLS = ("bash", "zsh", "fish")
DESCRIPTION = (
    "Print the code that makes SHELL complete gputop's commands and flags, the values of "
    "--sim-board and the like, and after -p/--pid the Python processes you run. Load it from "
    "your shell's startup file (examples below)."
)
EXAMPLES = """\
examples:
  eval "$(gputop completion bash)"                       in ~/.bashrc
  eval "$(gputop completion zsh)"                        in ~/.zshrc (after compinit)
  gputop completion fish > ~/.config/fish/completions/gputop.fish
"""
"""Shown after the flags in --help."""

COMMANDS = ("gputop", "gputop-why")
"""Both names the package installs (``gputop.DISTRIBUTION``)."""


MAX_PIDS = 200
"""Candidates offered after -p at most (a shell shows no more usefully)."""
SHOWN_CMDLINE = 70
"""Characters of a candidate's command line in its description (zsh and fish show it)."""


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request and exit (``cli.main`` calls this only while the
    shell asks: argcomplete's environment variable is set)."""
    import argcomplete

    for action in _actions(parser):
        if "--pid" in action.option_strings:
            action.completer = python_processes  # type: ignore[attr-defined]
    argcomplete.autocomplete(parser)


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    out = []
    for action in parser._actions:
        out.append(action)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out.extend(_actions(sub))
    return out


def python_processes(prefix: str = "", proc: str = "/proc", **_: object) -> dict[str, str]:
    """PID -> command line of this user's Python processes (a trainer, torchrun, accelerate:
    whatever runs a Python interpreter) whose PID starts with ``prefix``, newest first."""
    import os

    me = os.getuid()
    found: list[tuple[int, str]] = []
    for name in os.listdir(proc):
        if not name.isdigit() or not name.startswith(prefix):
            continue
        try:
            if os.stat(f"{proc}/{name}").st_uid != me:
                continue
            with open(f"{proc}/{name}/cmdline", "rb") as f:
                argv = f.read(4096).split(b"\0")
        except OSError:
            continue
        exe = os.path.basename(argv[0]).decode(errors="replace")
        if not exe.startswith("python") or int(name) == os.getpid():
            continue
        line = " ".join(a.decode(errors="replace") for a in argv if a)
        found.append((int(name), line[:SHOWN_CMDLINE]))
    found.sort(reverse=True)
    return {str(pid): line for pid, line in found[:MAX_PIDS]}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help=", ".join(SHELLS))


def run(args: argparse.Namespace) -> int:
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(list(COMMANDS), shell=args.shell))
    return 0
