"""The ``gputop`` command line: parses flags and hands over to one subcommand.

Kept free of Textual imports at module level: the colour system must be chosen (environment
variables) before Textual is imported, and headless commands should not pay for it at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from gputop import __version__


def _add_sim_flags(p: argparse.ArgumentParser) -> None:
    from gputop.sim import BOARDS, DRIVERS, SCENARIOS

    boards = ", ".join(sorted(BOARDS))
    p.add_argument(
        "--sim-board",
        metavar="NAME",
        help=f"read a simulated board instead of the real driver: {boards}; "
        "a count (h100x8) and -mig (a100-mig) may follow",
    )
    p.add_argument(
        "--sim-driver",
        metavar="GEN",
        default=None,
        help=f"driver generation of the simulated board: {', '.join(DRIVERS)} (default: newest)",
    )
    p.add_argument(
        "--sim-scenario",
        metavar="NAME",
        default="idle",
        help=f"workload on the simulated board: {', '.join(SCENARIOS)} (default: idle)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated board's noise")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputop",
        description="Attach to a training job and see why it is slow: GPU, host, stacks, steps.",
    )
    parser.add_argument("--version", action="version", version=f"gputop {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    snap = sub.add_parser(
        "snapshot",
        help="print one reading of every GPU (a table, or JSON with --json)",
        description="Take one reading of every GPU and print it. Exits 1 when NVML is missing.",
    )
    snap.add_argument("--json", action="store_true", help="print JSON (schema: docs/snapshot.md)")
    snap.add_argument(
        "--timeout",
        type=float,
        default=5.0,
        help="seconds to wait for the driver before giving up (default 5)",
    )
    _add_sim_flags(snap)
    return parser


def _install_sim(args: argparse.Namespace) -> str | None:
    """Install the simulated board when asked; returns its label or None."""
    from gputop.sim import CURRENT_DRIVER, SimBoard, SimConfigError, install

    if not args.sim_board:
        if args.sim_driver or args.sim_scenario != "idle":
            raise SimConfigError("--sim-driver and --sim-scenario need --sim-board")
        return None

    board = SimBoard(
        args.sim_board,
        driver=args.sim_driver or CURRENT_DRIVER,
        scenario=args.sim_scenario,
        seed=args.seed,
        warmup_s=300.0,
    )
    install(board)
    return f"{board.spec.label}, driver {board.driver.version}, scenario {board.scenario.key}"


def cmd_snapshot(args: argparse.Namespace) -> int:
    from gputop.render.text import render_snapshot
    from gputop.snapshot import build_document, sample_pair
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.nvml_errors import NvmlUnavailable
    from gputop.sources.watchdog import SourceStalled, Watchdog

    simulated = _install_sim(args)
    watchdog = Watchdog("NVML", timeout=args.timeout)
    try:
        source = watchdog.call(NvmlSource.open)
    except NvmlUnavailable as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 1
    except SourceStalled as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 1
    try:
        samples = sample_pair(source, watchdog)
        doc = build_document(source, samples, simulated=simulated)
    except SourceStalled as e:
        print(f"gputop: {e}", file=sys.stderr)
        return 1
    finally:
        if not watchdog.stalled:
            watchdog.call(source.close)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render_snapshot(doc))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    from gputop.sim import SimConfigError

    try:
        return {"snapshot": cmd_snapshot}[args.command](args)
    except SimConfigError as e:
        parser.error(str(e))
    except BrokenPipeError:  # `gputop snapshot | head`
        return 0
