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
from gputop.sim.boards import SimConfigError
from gputop.sim.fakelib import FakeNvmlLib
from gputop.sim.scenarios import Scenario

TESTED_PYNVML = ">=12.535,<14"
"""The nvidia-ml-py versions the simulated board is tested with: pyproject.toml's dependency
says the same (a test holds them together)."""

PRIVATE_NAMES = {
    "nvmlLib": object,
    "libLoadLock": object,
    "_nvmlGetFunctionPointer_cache": dict,
    "_nvmlLib_refcount": int,
}
"""pynvml's module-level names the board replaces or resets: not its public API, so a release
of nvidia-ml-py may move them (pyproject caps the versions this is tested with)."""


class PynvmlChanged(SimConfigError):
    """This nvidia-ml-py keeps its library elsewhere: the simulated board cannot go below it."""

    when = "a --sim-board under an nvidia-ml-py that moved the names the board replaces"


def private_names_problem(module: Any = pynvml) -> str | None:
    """One line when ``module`` lacks a name the board needs (or has it as another type)."""
    missing = [
        name
        for name, kind in PRIVATE_NAMES.items()
        if not hasattr(module, name)
        or (kind is not object and not isinstance(getattr(module, name), kind))
    ]
    if not missing:
        return None
    return (
        f"this nvidia-ml-py ({_version()}) has no {', '.join(missing)}, which the simulated "
        "board replaces to sit below pynvml: install a version gputop is tested with "
        f"(pip install 'nvidia-ml-py{TESTED_PYNVML}'); the real driver is not affected"
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nvidia-ml-py")
    except PackageNotFoundError:
        return "version unknown"


def install(board: SimBoard) -> FakeNvmlLib:
    """Make every later pynvml call talk to ``board``. Returns the fake library; PynvmlChanged
    (one line) when this pynvml keeps its library under other names."""
    problem = private_names_problem()
    if problem is not None:
        raise PynvmlChanged(problem)
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
