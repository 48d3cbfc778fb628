"""Shared fixtures: a simulated board installed below the real pynvml, on a clock the test owns."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from machine_lock import DIR_KEY, MachineLock

from gputop.sim import SimBoard, installed
from gputop.sources.nvml import NvmlSource

if os.environ.get("PYTEST_XDIST_WORKER"):
    # xdist gives its workers a terminal size (COLUMNS=80, LINES=24) that a plain run lacks, and
    # every gputop a test starts would take it for its terminal's (a tmux pane's resize unseen)
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="gputop-state-")
atexit.register(shutil.rmtree, os.environ["XDG_STATE_HOME"], ignore_errors=True)
"""The jobs' memory (``gputop/history``) of every gputop a test starts, in a folder of this
run's own: a test never reads or fills the user's ``~/.local/state/gputop``, and a test of the
memory sets its own."""

sys.path.insert(1, str(Path(__file__).resolve().parent / "corpus"))
"""The corpus's table and harness (``from scenarios import by_name``, ``from harness import
Harness``), as the benches import them; after tests/ itself, so a corpus script's name never
hides a helper of the tests."""

settings.register_profile("gputop", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gputop")
"""Every property test without a deadline: CI runs on two shared cores, where one example's
time says how busy the machine is, not whether the code is right (a wrong answer still fails
it, whatever the time); the examples per test stay bounded (``fuzz_examples``)."""


class FakeClock:
    """A monotonic clock that only moves when the test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Sim:
    board: SimBoard
    clock: FakeClock
    source: NvmlSource | None = None

    def open(self, **kwargs) -> NvmlSource:
        self.source = NvmlSource.open(clock=self.clock, **kwargs)
        return self.source

    def tick(self, seconds: float = 1.0):
        """Advance the clock and take one sample of every device."""
        assert self.source is not None
        self.clock.advance(seconds)
        return self.source.sample()


@pytest.fixture
def sim() -> Iterator[Callable[..., Sim]]:
    """``sim("h100x2", driver="r515", scenario="compute")`` -> a Sim installed below pynvml."""
    stack: list = []

    def make(spec: str = "h100", **kwargs) -> Sim:
        clock = FakeClock()
        board = SimBoard(spec, clock=clock, **kwargs)
        ctx = installed(board)
        ctx.__enter__()
        s = Sim(board=board, clock=clock)
        stack.append((ctx, s))
        return s

    yield make
    for ctx, s in reversed(stack):
        if s.source is not None:
            s.source.close()
        s.board.release_hangs()
        ctx.__exit__(None, None, None)


# ---- xdist: tests marked `alone` get the machine to themselves (tests/machine_lock.py) ----


@pytest.hookimpl(optionalhook=True)  # xdist's hook: known only where xdist is installed
def pytest_configure_node(node) -> None:
    """The controller: one private folder for the lock, passed to every worker."""
    folder = getattr(node.config, "_gputop_lock_dir", None)
    if folder is None:
        folder = tempfile.mkdtemp(prefix="gputop-tests-lock-")
        node.config._gputop_lock_dir = folder
    node.workerinput[DIR_KEY] = folder


def pytest_unconfigure(config) -> None:
    folder = getattr(config, "_gputop_lock_dir", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    lock = _worker_lock(item.config)
    if lock is None:
        yield
        return
    lock.hold(item.module.__name__, item.get_closest_marker("alone") is not None)
    yield
    if nextitem is None or nextitem.module is not item.module:
        lock.release()  # the module's fixtures have been torn down with this test


def _worker_lock(config) -> MachineLock | None:
    folder = getattr(config, "workerinput", {}).get(DIR_KEY)
    if folder is None:
        return None
    lock = getattr(config, "_gputop_lock", None)
    if lock is None:
        lock = config._gputop_lock = MachineLock(Path(folder))
    return lock
