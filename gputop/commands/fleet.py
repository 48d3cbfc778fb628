"""`gputop fleet`: every node of a training job on one screen, from Prometheus: each node's
verdict, its budget's biggest loss, its typical rank's work per step against the job's, stuck
ranks and throttled GPUs, the slow node first. Reads Prometheus' HTTP API only (never the
nodes): each node runs `gputop --pid PID --prometheus :9401`, Prometheus scrapes them with a
``training_job`` label (deploy/README.md, "Many nodes")."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time

from gputop.commands.flags import UsageError, json_help
from gputop.commands.screen import require_terminal

NAME = "fleet"
HELP = "every node of a training job, from Prometheus: the slow node first"
DESCRIPTION = (
    "One line per node of a training job, read from Prometheus' HTTP API: the node's verdict, "
    "its budget's biggest loss, its typical rank's work per step against the job's typical "
    "rank (the slow node first), stuck ranks and throttled GPUs."
)
EXAMPLES = """\
examples:
  gputop fleet --prometheus http://prom:9090 --job llama       a screen, every 10 s
  gputop fleet --prometheus http://prom:9090 --once            every job's nodes, once
  gputop fleet --prometheus http://prom:9090 --json | jq '.nodes[0]'
"""
"""Shown after the flags in --help."""
REFRESH_S = 10.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prometheus",
        metavar="URL",
        required=True,
        help="the Prometheus server that scrapes the nodes (http://HOST:9090)",
    )
    p.add_argument(
        "--job", metavar="NAME", help="only this training job (the scrape config's training_job)"
    )
    p.add_argument("--once", action="store_true", help="print one reading and exit")
    p.add_argument(
        "--json",
        action="store_true",
        help="one reading, one object per node, slow first, as " + json_help("fleet"),
    )
    p.add_argument(
        "--interval",
        type=float,
        default=REFRESH_S,
        metavar="S",
        help=f"seconds between the screen's readings (default {REFRESH_S:g})",
    )


def run(args: argparse.Namespace) -> int:
    from gputop import __version__
    from gputop.fleet.client import Prometheus
    from gputop.fleet.nodes import NodeRow, fleet_document, node_rows, text_lines
    from gputop.fleet.queries import QUERIES

    if not 1.0 <= args.interval <= 3600:
        raise UsageError(f"--interval {args.interval:g}: from 1 to 3600 seconds")
    if not args.prometheus.startswith(("http://", "https://")):
        raise UsageError(f"--prometheus {args.prometheus!r}: an http(s) URL (http://HOST:9090)")
    prom = Prometheus(args.prometheus)

    def reading() -> list[NodeRow]:
        results = {name: prom.query(make(args.job)) for name, make in QUERIES.items()}
        return node_rows(results)

    where = f"{args.prometheus}  {args.job or 'every job'}"
    if args.json:
        taken = dt.datetime.now(dt.timezone.utc).isoformat()
        doc = fleet_document(reading(), args.prometheus, args.job, taken, __version__)
        print(json.dumps(doc, indent=2))
    elif args.once:
        print(f"gputop fleet  {where}  {time.strftime('%H:%M:%S')}")
        print("\n".join(text_lines(reading())))
    else:
        require_terminal()
        from gputop.config import load_config, with_no_color
        from gputop.ui.terminal import apply_terminal_env

        config = with_no_color(load_config()).effective()  # the monitor's colours and theme
        apply_terminal_env(config.color, config.low_bandwidth)
        from gputop.ui.fleet_app import FleetApp

        app = FleetApp(reading, where=where, interval=args.interval, config=config)
        app.run(mouse=config.mouse)
    return 0
