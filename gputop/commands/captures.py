"""`gputop captures [--dir DIR]`: the capture root as it is: each capture's kind, status, size
and, for an armed one, the trigger that fired it and why (``capture/listing.py``)."""

from __future__ import annotations

import argparse
import json

NAME = "captures"
HELP = "list the capture folder: each capture's kind, status, size and trigger"
DESCRIPTION = (
    "List the capture folder (--dir, the config's `capture_dir`, $GPUTOP_CAPTURE_DIR or "
    "./gputop-captures), oldest first: each capture's kind, how it ended, its size and, for one "
    "an armed trigger took (--arm), the trigger and why. A folder that is not a capture is "
    "listed with the reason."
)
EXAMPLES = """\
examples:
  gputop captures                       the default folder
  gputop captures --dir /scratch/caps --json
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", metavar="DIR", help="the capture folder to list")
    p.add_argument("--json", action="store_true", help="one JSON object per capture, in a list")


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from gputop.capture.folder import capture_root
    from gputop.capture.listing import listing
    from gputop.config import load_config

    configured = load_config().capture_dir
    root = capture_root(args.dir or (str(configured) if configured is not None else None))
    kept = listing(root)
    if args.json:
        print(json.dumps([{**asdict(k), "armed": k.armed} for k in kept], indent=2))
        return 0
    if not kept:
        print(f"no captures in {root}")
        return 0
    total = sum(k.bytes for k in kept)
    print(f"{len(kept)} in {root}, {_size(total)} in all:")
    for k in kept:
        if k.note:
            print(f"  {k.name}  {_size(k.bytes)}  ({k.note})")
            continue
        by = f"armed {k.trigger}: {k.why}" if k.trigger else "by hand"
        print(f"  {k.name}  {k.kind}  {k.status}  {_size(k.bytes)}  {by}")
    return 0


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
