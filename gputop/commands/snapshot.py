"""`gputop snapshot`: one reading of every GPU (and of a process tree with --pid), printed as
a table or versioned JSON (docs/snapshot.md)."""

from __future__ import annotations

import argparse
import json
import sys

from gputop.commands.flags import add_gpu_flags, add_sim_flags, json_help
from gputop.commands.gpu_source import board_from_flags, gpu_choice, open_gpus
from gputop.commands.target import attach
from gputop.errors import CannotDo

NAME = "snapshot"
HELP = "print one reading of every GPU (a table, or JSON with --json)"
DESCRIPTION = "Take one reading of every GPU and print it. Exits 1 when NVML is missing."


EXAMPLES = """\
examples:
  gputop snapshot                             a table of every GPU now
  gputop snapshot -p 1234 --json              with the process tree, as JSON
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json",
        action="store_true",
        help=json_help("snapshot", "print JSON"),
    )
    p.add_argument(
        "-p", "--pid", type=int, metavar="PID", help="also read this process tree (host data)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="seconds to wait for the driver before giving up (default 5)",
    )
    add_sim_flags(p)
    add_gpu_flags(p)


def run(args: argparse.Namespace) -> int:
    from gputop.render.text import render_snapshot
    from gputop.snapshot import build_document, sample_pair
    from gputop.sources.nvml import NvmlSource

    board = board_from_flags(args)
    attached = attach(args.pid)
    gpus = open_gpus(board, timeout=args.timeout, only=gpu_choice(args))
    if gpus.problem:
        raise CannotDo(gpus.problem)
    source = gpus.source
    assert isinstance(source, NvmlSource)  # NoGpus comes with a problem
    host, link, stacks = attached.host, attached.agents, attached.stacks
    try:
        if host is not None:
            host.sample()  # rates need two readings; sample_pair spaces them
        if link is not None:
            link.sample()  # connect; the backlog of steps arrives meanwhile
        samples = sample_pair(source, gpus.watchdog)
        doc = build_document(
            source.devices,
            source.capabilities,
            samples,
            simulated=gpus.simulated,
            host=host.sample() if host is not None else None,
            agents=link.sample() if link is not None else None,
            stacks=stacks.sample() if stacks is not None else None,
        )
    finally:  # a SourceStalled goes on to cli.main: one line, exit 1
        gpus.close()
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render_snapshot(doc))
    return 0
