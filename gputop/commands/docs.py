"""`gputop docs [NAME]`: gputop's documents (the JSON outputs' fields, captures, Prometheus
metrics, the recording and wire formats), shipped inside the package: --help names them, and an
installed gputop has no checkout to read them in."""

from __future__ import annotations

import argparse
import sys

from gputop.errors import CannotDo

NAME = "docs"
HELP = "print one of gputop's documents (JSON fields, captures, metrics, formats)"
DESCRIPTION = "Print one of the documents shipped with gputop (Markdown); with no NAME, list them."
EXAMPLES = """\
examples:
  gputop docs                                 what there is
  gputop docs diagnose                        every field of `gputop diagnose --json`
  gputop docs prometheus | less               the metrics `--prometheus` serves
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from gputop.resources import DOCS

    p.add_argument("name", nargs="?", choices=sorted(DOCS), metavar="NAME",
                   help=", ".join(sorted(DOCS)))  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from gputop.resources import DOCS, bundled_docs_dir

    where = bundled_docs_dir()
    if args.name is None:
        for name, file in sorted(DOCS.items()):
            print(f"{name:12} {_title(where / file)}")
        return 0
    path = where / DOCS[args.name]
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        raise CannotDo(f"cannot read {path}: {e.strerror or e}; reinstall gputop") from None
    sys.stdout.write(text)
    return 0


def _title(path) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().lstrip("# ").strip()
    except OSError:
        return "(missing: reinstall gputop)"
