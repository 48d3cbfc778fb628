"""`gputop man`: gputop's manual page (roff), written from the parser --help shows, so the two
never disagree. argparse-manpage renders the parser; the sections it cannot know (environment,
files, exit status: from ``gputop.errors``) are here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

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
    from gputop.errors import exit_status_table

    page.add_section("ENVIRONMENT", "=", _tagged(ENVIRONMENT))
    page.add_section("EXIT STATUS", "=", _tagged(exit_status_table()))
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


def _tagged(rows: Sequence[tuple[str, str]]) -> str:
    """(term, text) rows as roff tagged paragraphs: the term in bold, its text below."""
    return "\n".join(f".TP\n\\fB{term}\\fR\n{_roff(text)}" for term, text in rows)


def _roff(text: str) -> str:
    """Plain text safe in roff: backslashes and hyphens escaped, no line starting with a dot."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line
                     for line in text.splitlines())  # fmt: skip


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(manual(args.parsers[None]))
    return 0
