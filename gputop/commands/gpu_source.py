"""The GPU source a command reads, from its flags: the simulated board (--sim-*), the GPUs
chosen (--only, --only-visible), and NVML opened in one place with one error path (real NVML,
a simulated board, or none with the reason).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where they are used: the command decides what it loads
    from gputop.sim.scenarios import PhaseFollower, Scenario
    from gputop.sources.feeds import NoGpus
    from gputop.sources.gpu_choice import GpuChoice
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.watchdog import Watchdog


def gpu_choice(args: argparse.Namespace) -> GpuChoice | None:
    """What --only or --only-visible chose (None: every GPU); a note on stderr when
    CUDA_VISIBLE_DEVICES's indices may not be nvidia-smi's."""
    from gputop.sources.gpu_choice import order_note, visible_devices

    if getattr(args, "only", None) is not None:
        return args.only
    if not getattr(args, "only_visible", False):
        return None
    choice = visible_devices(os.environ)
    note = order_note(choice, os.environ)
    if note:
        print(f"gputop: {note}", file=sys.stderr)
    return choice


@dataclass(frozen=True)
class Board:
    """A simulated board to install below pynvml before NVML is opened."""

    spec: str
    driver: str | None = None
    scenario: str | Scenario = "idle"
    """A scenario name, or a Scenario (the PhaseFollower's)."""
    seed: int = 0
    warmup_s: float = 300.0

    def checked(self) -> Board:
        """Itself, once its names are known to the simulator (SimConfigError otherwise): a bad
        --sim-board stops the command before anything starts (a job, a screen)."""
        from gputop.sim.board import SimBoard

        SimBoard(self.spec, self.driver, self.scenario, self.seed)
        return self

    short_label: bool = False
    """The demo's banner label (board and workload) instead of the full one."""


def board_from_flags(
    args: argparse.Namespace, follower: PhaseFollower | None = None
) -> Board | None:
    """The --sim-* flags as a Board (None without --sim-board); with a ``follower`` the
    board's activity follows the real process's phases."""
    from gputop.sim import SimConfigError

    if not args.sim_board:
        if args.sim_driver or args.sim_scenario != "idle":
            raise SimConfigError("--sim-driver and --sim-scenario need --sim-board")
        return None
    scenario = follower.scenario() if follower is not None else args.sim_scenario
    return Board(args.sim_board, args.sim_driver, scenario, args.seed).checked()


def follower_for(args: argparse.Namespace, target: object) -> PhaseFollower | None:
    """A PhaseFollower when a simulated board with no scripted workload watches a real process:
    the board is then busy while the process computes (from its agent's phases, or from its
    stacks when it has no agent), as a real GPU would be."""
    if not getattr(args, "sim_board", None) or target is None or args.sim_scenario != "idle":
        return None
    from gputop.sim.scenarios import PhaseFollower

    return PhaseFollower()


@dataclass(frozen=True)
class Gpus:
    """The GPU source a command reads: NVML (over the real driver or a simulated board), or
    ``NoGpus`` with the reason when NVML cannot be used."""

    source: NvmlSource | NoGpus
    simulated: str | None
    """The SIMULATED label, or None on a real driver."""
    watchdog: Watchdog
    """The deadline NVML was opened under (snapshot reads through it too)."""
    problem: str | None = None
    """Why NVML cannot be used, with what to do about it (None: it is open)."""

    @property
    def missing(self) -> str | None:
        """Why there are no GPU readings, without the advice (None: NVML is open)."""
        from gputop.sources.feeds import NoGpus

        return self.source.reason if isinstance(self.source, NoGpus) else None

    def close(self) -> None:
        if not self.watchdog.stalled:
            self.watchdog.call(self.source.close)


def open_gpus(
    board: Board | None = None, timeout: float = 10.0, only: GpuChoice | None = None
) -> Gpus:
    """The one way gputop opens its GPU source: installs the simulated board when asked, then
    opens NVML under a deadline (a wedged driver cannot hang gputop). When NVML cannot be used
    the source is ``NoGpus`` with one line saying why; each command decides whether it can go
    on without GPUs. ``only``: the GPUs to watch (``gpu_choice``); one it does not find is a
    NoSuchGpu (a usage error)."""
    from gputop.sources.feeds import NoGpus
    from gputop.sources.gpu_choice import NoSuchGpu
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.nvml_errors import NvmlUnavailable
    from gputop.sources.watchdog import SourceStalled, Watchdog

    simulated = None
    if board is not None:
        from gputop.sim import start_simulated_board

        sim = start_simulated_board(
            board.spec, board.driver, board.scenario, board.seed, board.warmup_s
        )
        simulated = (
            sim.short_label
            if board.short_label
            else f"{sim.spec.label}, driver {sim.driver.version}, scenario {sim.scenario.key}"
        )
    watchdog = Watchdog("NVML", timeout=timeout)
    try:
        return Gpus(watchdog.call(lambda: NvmlSource.open(only=only)), simulated, watchdog)
    except NoSuchGpu:
        watchdog.close()
        raise
    except NvmlUnavailable as e:
        return Gpus(NoGpus(e.what), simulated, watchdog, str(e))
    except SourceStalled as e:
        return Gpus(NoGpus(str(e)), simulated, watchdog, str(e))
