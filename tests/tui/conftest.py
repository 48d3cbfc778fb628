"""TUI fixtures: apps fed from a simulated board on a frozen clock, no sampling thread,
no user config, UTC time, so every screen is deterministic."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputop.config import Config
from gputop.model import GpuSample
from gputop.sim import SimBoard, installed
from gputop.sources.nvml import NvmlSource
from gputop.ui.app import GputopApp

WALL0 = 1_795_000_000.0  # a fixed epoch time for headers and snapshot file names


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("GPUTOP_CONFIG", raising=False)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


class Recorded:
    """A feed built from a simulated board: static devices plus recorded history."""

    def __init__(self, source: NvmlSource, history: list[list[GpuSample]], label: str) -> None:
        self.source = source
        self.devices = source.devices
        self.capabilities = source.capabilities
        self.history = history
        self.label = label

    def sample(self) -> list[GpuSample]:
        return self.history[-1]


def record(
    board: str = "h100x8",
    scenario: str = "compute",
    ticks: int = 60,
    step: float = 2.0,
    driver: str = "r580",
    seed: int = 0,
) -> Recorded:
    clock = [1000.0]
    sim = SimBoard(
        board, scenario=scenario, driver=driver, seed=seed, clock=lambda: clock[0], warmup_s=300
    )
    with installed(sim):
        src = NvmlSource.open(clock=lambda: clock[0], wall=lambda: WALL0 + clock[0])
        history = []
        for _ in range(ticks):
            clock[0] += step
            history.append(src.sample())
        src.close()
    return Recorded(src, history, sim.short_label)


@pytest.fixture
def make_app(tmp_path) -> Iterator[Callable[..., GputopApp]]:
    def make(recorded: Recorded | None = None, config: Config | None = None, **kw) -> GputopApp:
        recorded = recorded or record()
        config = config or Config(
            snapshot_dir=tmp_path / "snapshots", themes_dir=tmp_path / "no-themes"
        )
        app = GputopApp(
            recorded,
            config=config,
            simulated=kw.pop("simulated", recorded.label),
            start_sampler=False,
            **kw,
        )
        app.recorded = recorded  # type: ignore[attr-defined]
        return app

    yield make


async def ingest_all(app: GputopApp, pilot) -> None:
    for samples in app.recorded.history:  # type: ignore[attr-defined]
        app.ingest(samples)
    await pilot.pause()


def snapshot_dir_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else []


os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
