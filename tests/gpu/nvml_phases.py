"""The NVML readings of the check: idle, then under each CUDA load, ``READINGS`` readings
``INTERVAL_S`` apart (every call of ``nvml_probe``, and GPM's metrics between readings).

The same phases run over the simulated board: ``simulated`` reads its twin of a real board on
a fake clock (a second of board time costs nothing), which is what ``nvml_compare`` holds the
real readings against; ``--dry`` reads the board on the real clock, as a real GPU is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pynvml as N
from nvml_probe import GpmReader, device_calls, system_calls

PHASES = ("idle", "matmul", "bandwidth", "tiny")
SCENARIO_OF = {"idle": "idle", "matmul": "compute", "bandwidth": "membw", "tiny": "launch-bound"}
"""The simulated board's scenario that models each load."""
READINGS = 5
INTERVAL_S = 1.0
LOAD_WARMUP_S = 3.0
"""A load runs this long (past its own warm-up) before its first reading: clocks and power
settled, the averaged power reading caught up."""


def read_phase(
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    readings: int = READINGS,
    interval: float = INTERVAL_S,
) -> dict[str, Any]:
    """``readings`` readings of device 0, ``interval`` apart (nvmlInit already done)."""
    gpm = GpmReader()
    gpm.read()  # the first sample: metrics come between this one and the next
    t0 = clock()
    out = []
    try:
        for _ in range(readings):
            sleep(interval)
            out.append({"t_s": round(clock() - t0, 3), "calls": device_calls(), "gpm": gpm.read()})
    finally:
        gpm.close()
    return {"system": system_calls(), "readings": out}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def simulated(board: str = "h100", driver: str | None = None) -> dict[str, dict[str, Any]]:
    """Every phase over the simulated ``board`` (a fresh one per phase, its load already
    running LOAD_WARMUP_S), on a fake clock: the twin's readings, in well under a second."""
    from gputop.sim import SimBoard, installed

    phases = {}
    for phase in PHASES:
        clock = FakeClock()
        sim = SimBoard(
            board,
            driver=driver,
            scenario=SCENARIO_OF[phase],
            clock=clock,
            warmup_s=LOAD_WARMUP_S if phase != "idle" else 0.0,
        )
        with installed(sim):
            N.nvmlInit()
            try:
                phases[phase] = {
                    "load": {"ok": True, "reason": ""},
                    **read_phase(sleep=clock.advance, clock=clock),
                }
            finally:
                N.nvmlShutdown()
    return phases
