"""Put a simulated board *below* the real pynvml: it becomes ``pynvml.nvmlLib``.

pynvml only loads ``libnvidia-ml.so.1`` when ``nvmlLib`` is None, and resolves every entry point
through ``getattr(nvmlLib, name)`` (cached), so replacing the library object is all it takes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pynvml

from gputop.sim.board import SimBoard
from gputop.sim.fakelib import FakeNvmlLib
from gputop.sim.scenarios import Scenario


def install(board: SimBoard) -> FakeNvmlLib:
    """Make every later pynvml call talk to ``board``. Returns the fake library."""
    fake = FakeNvmlLib(board)
    with pynvml.libLoadLock:
        pynvml.nvmlLib = fake.exports()
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlLib_refcount = 0
    return fake


def uninstall(saved: tuple[Any, dict[str, Any], int] | None = None) -> None:
    with pynvml.libLoadLock:
        lib, cache, refcount = saved if saved else (None, {}, 0)
        pynvml.nvmlLib = lib
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlGetFunctionPointer_cache.update(cache)
        pynvml._nvmlLib_refcount = refcount


def start_simulated_board(
    spec: str,
    driver: str | None = None,
    scenario: str | Scenario = "idle",
    seed: int = 0,
    warmup_s: float = 0.0,
) -> SimBoard:
    """Build a board on the real clock and install it for the rest of the process (the CLI's
    --sim-board and `gputop demo`). No ``driver``: the board's capture's driver."""
    board = SimBoard(spec, driver=driver or None, scenario=scenario, seed=seed, warmup_s=warmup_s)
    install(board)
    return board


@contextmanager
def installed(board: SimBoard) -> Iterator[FakeNvmlLib]:
    """``install`` for the duration of a block, restoring whatever pynvml had before."""
    saved = (
        pynvml.nvmlLib,
        dict(pynvml._nvmlGetFunctionPointer_cache),
        pynvml._nvmlLib_refcount,
    )
    fake = install(board)
    try:
        yield fake
    finally:
        uninstall(saved)
