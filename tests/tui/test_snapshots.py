"""SVG snapshots of the monitor at 80x24 and 160x48: compute-bound, throttled, starved.

Deterministic: samples are recorded from a seeded simulated board on a frozen clock and
injected (no sampling thread), the header's time comes from the samples, TZ is UTC.
Review changes in snapshot_report.html; accept with `pytest --snapshot-update`.
"""

from __future__ import annotations

import pytest
from conftest import ingest_all, record

SIZES = {"compact": (80, 24), "wide": (160, 48)}
SCENARIOS = ["compute", "power-throttled", "thermal-throttled", "starved", "launch-bound"]


def after_key(app, key: str):
    """run_before for a snapshot taken once the readings are in and ``key`` was pressed."""

    async def run_before(pilot):
        await ingest_all(app, pilot)
        await pilot.press(key)
        await pilot.pause(0.1)

    return run_before


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_main_screen(snap_compare, make_app, scenario, size):
    app = make_app(record("h100x8", scenario, ticks=45, step=0.9))
    assert snap_compare(app, terminal_size=SIZES[size], run_before=lambda p: ingest_all(app, p))


@pytest.mark.parametrize("size", SIZES)
def test_detail_screen(snap_compare, make_app, size):
    app = make_app(record("h100x2", "power-throttled", ticks=45, step=0.9))
    assert snap_compare(app, terminal_size=SIZES[size], run_before=after_key(app, "enter"))


@pytest.mark.parametrize("size", SIZES)
def test_help_screen(snap_compare, make_app, size):
    app = make_app(record("a100x2", "membw", ticks=5))
    assert snap_compare(app, terminal_size=SIZES[size], run_before=after_key(app, "question_mark"))


@pytest.mark.parametrize("size", SIZES)
def test_second_gpu_selected(snap_compare, make_app, size):
    """j moves the mark (and the row's background) to the next GPU."""
    app = make_app(record("h100x2", "power-throttled", ticks=20, step=0.9))
    assert snap_compare(app, terminal_size=SIZES[size], run_before=after_key(app, "j"))


@pytest.mark.parametrize("theme", ["gputop-light", "gputop-mono", "gputop-ansi"])
def test_themes(snap_compare, make_app, tmp_path, theme):
    from gputop.config import Config

    config = Config(theme=theme, snapshot_dir=tmp_path, themes_dir=tmp_path / "none")
    app = make_app(record("l40s", "thermal-throttled", ticks=20), config=config)
    assert snap_compare(app, terminal_size=(80, 24), run_before=lambda p: ingest_all(app, p))
