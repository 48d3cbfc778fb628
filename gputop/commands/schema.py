"""`gputop schema NAME`: the JSON Schema of one of gputop's JSON outputs, or its document, from
the installed package (an installed gputop has no docs/ folder to point to)."""

from __future__ import annotations

import argparse
import sys

NAME = "schema"
HELP = "print the JSON Schema (or, with --doc, the description) of a JSON output"
DESCRIPTION = (
    "Print the JSON Schema (draft 2020-12) of `gputop diagnose --json`, `snapshot --json`, "
    "`report --json` or a capture's manifest.json, as shipped with this gputop; with --doc, "
    "the document that describes each field."
)
EXAMPLES = """\
examples:
  gputop schema diagnose                      the schema of `gputop diagnose --json`
  gputop schema snapshot --doc                what each field of `gputop snapshot --json` means
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from gputop.schemas import SCHEMAS

    p.add_argument("name", choices=SCHEMAS, metavar="NAME", help=", ".join(SCHEMAS))
    p.add_argument("--doc", action="store_true", help="the document (Markdown) instead")


def run(args: argparse.Namespace) -> int:
    from gputop.resources import bundled_docs_dir
    from gputop.schemas import DOCS, schema_text

    if not args.doc:
        sys.stdout.write(schema_text(args.name))
        return 0
    path = bundled_docs_dir() / DOCS[args.name]
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        print(f"gputop: cannot read {path}: {e.strerror or e}; reinstall gputop", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0
