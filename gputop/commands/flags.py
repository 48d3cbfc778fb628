"""The flag groups several subcommands share (the GPUs, the simulated board, the screen, the
target, the outputs), their values' types and help, and the error a command raises for flags
that contradict each other. Defined once so that each flag reads and parses alike everywhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gputop.errors import BadUsage

if TYPE_CHECKING:  # imported where it is used: parsing --only loads the GPU choice
    from gputop.sources.gpu_choice import GpuChoice


class UsageError(BadUsage):
    """Flags that contradict each other, or a value only the command can check (a theme): said
    with the command's usage, as argparse says its own errors."""

    when = "flags that contradict each other, or a value only the command can check"


BUNDLED_THEMES = ("gputop-dark", "gputop-light", "gputop-ansi", "gputop-mono")
"""The themes in themes/ (a test holds this to the folder): listed in --help without reading it."""


def interval_seconds(text: str) -> float:
    """--interval: seconds within the range the screen keeps (argparse says the range and exits
    2 otherwise, before anything opens)."""
    from gputop.config import INTERVAL_MAX, INTERVAL_MIN

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not INTERVAL_MIN <= value <= INTERVAL_MAX:
        raise argparse.ArgumentTypeError(
            f"{text} s is outside {INTERVAL_MIN:g}..{INTERVAL_MAX:g} seconds"
        )
    return value


def add_sim_flags(p: argparse.ArgumentParser) -> None:
    """--sim-board and its companions: a simulated board below pynvml instead of the driver."""
    from gputop.sim import BOARDS, DRIVERS, SCENARIOS

    boards = ", ".join(sorted(BOARDS))
    p.add_argument(
        "--sim-board",
        metavar="NAME",
        default=None,
        help=f"read a simulated board instead of the real driver: {boards}; "
        "a count (h100x8) and -mig (a100-mig) may follow",
    )
    p.add_argument(
        "--sim-driver",
        metavar="GEN",
        default=None,
        help=f"driver generation of the simulated board: {', '.join(DRIVERS)} (default: the "
        "driver of the board's real capture)",
    )
    p.add_argument(
        "--sim-scenario",
        metavar="NAME",
        default="idle",
        help=f"workload on the simulated board: {', '.join(SCENARIOS)} (default: idle)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated board's noise")


def add_gpu_flags(p: argparse.ArgumentParser) -> None:
    """--only and --only-visible: the GPUs shown and judged (``sources/gpu_choice.py``)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--only",
        type=_only,
        default=argparse.SUPPRESS,  # given before a subcommand (gputop --only 0 diagnose) or after
        metavar="GPUS",
        help="only these GPUs: indices as nvidia-smi numbers them, or UUIDs (or their start), "
        "comma-separated: --only 0,3",
    )
    group.add_argument(
        "--only-visible",
        action="store_true",
        default=argparse.SUPPRESS,
        help="only the GPUs in this shell's CUDA_VISIBLE_DEVICES (indices name the same GPUs "
        "as nvidia-smi's when CUDA_DEVICE_ORDER=PCI_BUS_ID; UUIDs always do)",
    )


def _only(text: str) -> GpuChoice:
    from gputop.sources.gpu_choice import parse_only

    try:
        return parse_only(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--only ")) from None


def add_ui_flags(
    p: argparse.ArgumentParser, under_command: bool = False, live: bool = True
) -> None:
    """The monitor's flags; on a subcommand they default to "not given" so that
    ``gputop --interval 3 demo`` and ``gputop demo --interval 3`` mean the same. Live modes
    also take a target and the outputs (``live``; replay does not)."""
    from gputop.config import COLOR_MODES

    if under_command:
        p.argument_default = argparse.SUPPRESS

    p.add_argument(
        "--interval",
        type=interval_seconds,
        metavar="S",
        help="seconds between screen updates, 0.5..10 (default 2; 5 with --low-bandwidth)",
    )
    p.add_argument(
        "--color",
        choices=COLOR_MODES,
        help="colours to use (default auto: from COLORTERM and TERM, and mono when NO_COLOR is "
        "set); mono is black and white",
    )
    p.add_argument(
        "--theme",
        metavar="NAME",
        help=f"theme: {', '.join(BUNDLED_THEMES)} or one in the themes folder (default "
        "gputop-dark)",
    )
    p.add_argument(
        "--no-mouse",
        dest="mouse",
        action="store_const",
        const=False,
        help="do not capture the mouse (every action has a key)",
    )
    p.add_argument(
        "--low-bandwidth",
        action="store_const",
        const=True,
        help="for slow ssh links: 16 colours, no animation, no mouse, 5 s refresh, narrow charts",
    )
    p.add_argument("--config", type=Path, metavar="FILE", help="config file to read")
    if not live:
        return
    add_output_flags(p)
    p.add_argument(
        "-p",
        "--pid",
        type=int,
        metavar="PID",
        help="the training process to attach to (its DataLoader workers and children too)",
    )


def json_help(schema: str, verb: str = "JSON") -> str:
    """The --json flag's help: where an installed gputop shows the output's schema and fields."""
    return f"{verb} (its schema: `gputop schema {schema}`; its fields: `gputop docs {schema}`)"


ATTACH_HELP = (
    "with --pid: load gputop's agent into the process and the ranks below it if they have none "
    "(steps and phases; no restart, nothing installed in the job's environment: a private "
    "copy of the agent goes into its own /tmp, a container's too, and is removed once loaded): "
    "Python 3.10+; 3.14+ through sys.remote_exec, older through gdb or lldb (a pending call "
    "the main thread runs at its next safe point). Needs the same user or root and ptrace "
    "allowed; each refusal says what to do. Without it gputop only says how"
)


def add_attach_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--attach", action="store_const", const=True, help=ATTACH_HELP)
    p.add_argument(
        "--stacks-budget",
        type=budget_percent,
        metavar="PCT",
        help="with --pid: the CPU py-spy may use, in %% of one core (default 2): processes "
        "without gputop's agent are read within it, ranks first, DataLoader workers in turn",
    )


def budget_percent(text: str) -> float:
    """``--stacks-budget``'s value as a share of one core (2 -> 0.02)."""
    try:
        pct = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of percent") from None
    if not 0 < pct <= 100:
        raise argparse.ArgumentTypeError(f"{text}: give a percent of one core above 0, up to 100")
    return pct / 100


def add_output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="also write the session to FILE (every reading and verdict; `gputop replay FILE`, "
        "`gputop report FILE`)",
    )
    p.add_argument(
        "--prometheus",
        metavar="[ADDR:]PORT",
        help="serve Prometheus metrics on PORT (localhost unless ADDR is given; the metrics: "
        "`gputop docs prometheus`)",
    )
    add_history_flag(p)


def add_history_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-history",
        action="store_true",
        help="neither compare this run with the job's last nor remember it (the config's "
        "`history = false`; the memory: `gputop history`)",
    )


def triggers(text: str) -> frozenset[str]:
    """``--arm``'s and ``--exit-on``'s value (``vocab.arm.parse_triggers``)."""
    from gputop.vocab.arm import parse_triggers

    try:
        return parse_triggers(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: must be above 0")
    return value


def add_arm_flags(p: argparse.ArgumentParser, exit_on: bool = False) -> None:
    """Armed captures (``gputop/arm``): the triggers, the warm-up, the disk budget, where the
    captures go; ``exit_on``: also --exit-on (the modes without a screen)."""
    from gputop.vocab.arm import TRIGGERS

    p.add_argument(
        "--arm",
        nargs="?",
        const="all",
        type=triggers,
        metavar="TRIGGERS",
        help="take the fitting capture by itself when the verdict names an event: "
        f"{', '.join(TRIGGERS)} (comma-separated; alone: all of them; the config's `arm`)",
    )
    p.add_argument(
        "--arm-warmup",
        type=float,
        metavar="S",
        help="seconds of the job's start in which only a hang fires (default 60)",
    )
    p.add_argument(
        "--arm-budget-mb",
        type=positive,
        metavar="MB",
        help="past this size of the capture folder the oldest armed captures are removed, "
        "never one taken by hand (default 4096; the config's `arm_budget_mb`)",
    )
    p.add_argument(
        "--capture-dir",
        metavar="DIR",
        help="where capture folders go (default: the config's `capture_dir`, "
        "$GPUTOP_CAPTURE_DIR or ./gputop-captures)",
    )
    if exit_on:
        p.add_argument(
            "--exit-on",
            type=triggers,
            metavar="TRIGGERS",
            help="end once one of these fired and its captures are written, with exit status "
            "3 (arms them too)",
        )


def command_of(args: argparse.Namespace) -> list[str]:
    """The command after ``--`` (argparse keeps the separator in a REMAINDER)."""
    return args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
