"""Shared fixtures: a simulated board installed below the real pynvml, on a clock the test owns."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings

from gputop.sim import SimBoard, installed
from gputop.sources.nvml import NvmlSource

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
