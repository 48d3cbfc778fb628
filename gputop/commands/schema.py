"""`gputop schema NAME`: the JSON Schema of one of gputop's JSON outputs, from the installed
package (an installed gputop has no checkout to point to; `gputop docs NAME` has the fields'
meanings)."""

from __future__ import annotations

import argparse
import sys

NAME = "schema"
HELP = "print the JSON Schema of a JSON output (diagnose, snapshot, report, capture)"
DESCRIPTION = (
    "Print the JSON Schema (draft 2020-12) of `gputop diagnose --json`, `snapshot --json`, "
    "`report --json` or a capture's manifest.json, as shipped with this gputop. What each "
    "field means: `gputop docs NAME`."
)
EXAMPLES = """\
examples:
  gputop schema diagnose                      the schema of `gputop diagnose --json`
  gputop schema snapshot > snapshot.json      to validate a script's input against
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from gputop.schemas import SCHEMAS

    p.add_argument("name", choices=SCHEMAS, metavar="NAME", help=", ".join(SCHEMAS))


def run(args: argparse.Namespace) -> int:
    from gputop.schemas import schema_text

    sys.stdout.write(schema_text(args.name))
    return 0
