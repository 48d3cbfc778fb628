"""`gputop man`: gputop's manual page (roff), written from the parser --help shows, so the two
never disagree. argparse-manpage renders the parser; the sections it cannot know (environment,
files, exit status) are here."""

from __future__ import annotations

import argparse
import sys

NAME = "man"
HELP = "print gputop's manual page (roff, for man)"
DESCRIPTION = "Print gputop's manual page, made from the same parser as --help."
EXAMPLES = """\
examples:
  gputop man | man -l -                                  read it now
  gputop man > ~/.local/share/man/man1/gputop.1          then `man gputop`
"""
"""Shown after the flags in --help."""

ENVIRONMENT = (
    ("NO_COLOR", "set and not empty: black and white (mono), unless --color or the config file "
     "chooses colours (no-color.org)"),
    ("CUDA_VISIBLE_DEVICES", "the GPUs --only-visible watches"),
    ("GPUTOP_CONFIG", "the config file (default ~/.config/gputop/config.toml)"),
    ("GPUTOP_DIR", "the directory of the agents' sockets (default $XDG_RUNTIME_DIR/gputop, "
     "else /tmp/gputop-UID); it must be yours alone"),
    ("GPUTOP_CAPTURE_DIR", "where captures go (default ./gputop-captures)"),
    ("GPUTOP_DISABLE", "1 in a training process: gputop's agent does nothing there"),
)  # fmt: skip
"""What a user sets, and what it does (the man page's ENVIRONMENT)."""

EXIT_STATUS = (
    "The same in every command: 0 done; 1 what was asked could not be done (no such PID, no "
    "NVIDIA driver and nothing else to watch, a capture that failed, `replay --check` found a "
    "difference); 2 a bad flag, value or input file (a recording that is not one, --record to "
    "a path that exists), said before anything opens (with the command's own usage for a "
    "flag); 127 the command given to `gputop run` or `gputop diagnose --` cannot be started; "
    "`gputop run` exits with its job's status."
)
"""README.md's "Exit status" says the same (a test holds them together)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def manual(parser: argparse.ArgumentParser) -> str:
    """The manual page of ``parser`` (gputop's top-level parser), in roff."""
    from argparse_manpage.manpage import Manpage

    from gputop import DISTRIBUTION, __version__

    page = Manpage(
        parser,
        _data={
            "project_name": "gputop",
            "version": __version__,
            "description": "attach to a training job and see why it is slow",
            "authors": ["gputop developers"],
            "manual_title": "gputop manual",
        },
    )
    env = "\n".join(f".TP\n\\fB{name}\\fR\n{_roff(text)}" for name, text in ENVIRONMENT)
    page.add_section("ENVIRONMENT", "=", env)
    page.add_section("EXIT STATUS", "=", _roff(EXIT_STATUS))
    page.add_section(
        "SEE ALSO",
        "=",
        _roff(
            "gputop docs (the JSON outputs' fields, captures, metrics, formats); gputop "
            f"schema NAME; the package {DISTRIBUTION} (pipx install {DISTRIBUTION}); "
            "nvidia-smi(1), py-spy(1)"
        ),
    )
    return str(page)


def _roff(text: str) -> str:
    """Plain text safe in roff: backslashes and hyphens escaped, no line starting with a dot."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line
                     for line in text.splitlines())  # fmt: skip


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(manual(args.parsers[None]))
    return 0
