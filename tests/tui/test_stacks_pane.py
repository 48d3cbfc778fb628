"""The stacks pane and the full-dump screen."""

from __future__ import annotations

import os
import stat

import pytest
from conftest import FixedStacks, fed, ingest_all, record, stacks_window
from tests_support import until_drawn

from gputop.ui.app import Target
from gputop.ui.panes.stacks import StacksPane

DENIED = "not allowed to read pid 5001's memory (ptrace): run gputop as the same user or root"


async def test_pane_shows_phase_evidence_and_shares(make_app):
    window = stacks_window()
    app = make_app(record("t4", ticks=3), stacks=FixedStacks(window))
    async with app.run_test(size=(160, 48)) as pilot:
        await ingest_all(app, pilot)
        for s in window:
            app.take("stacks", s)
        await pilot.pause()
        text = app.query_one(StacksPane).text()
        assert "4242 MainThread" in text and "data wait" in text
        assert "_MultiProcessingDataLoaderIter._try_get_data" in text
        assert "[data wait 70% forward 30%]" in text
        assert "1 DataLoader workers sampled: fetching 100%" in text


async def test_permission_denied_is_shown_as_an_instruction(make_app):
    app = make_app(stacks=FixedStacks(stacks_window(error=DENIED)))
    async with app.run_test(size=(160, 48)) as pilot:
        for s in stacks_window(error=DENIED):
            app.take("stacks", s)
        await pilot.pause()
        assert "not allowed to read pid 5001" in app.query_one(StacksPane).text()


async def test_d_dumps_every_thread_to_a_screen_and_a_private_file(make_app, tmp_path):
    app = make_app(stacks=FixedStacks(stacks_window()))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("d")
        await until_drawn(pilot, lambda: type(app.screen).__name__ == "DumpScreen", timeout=20,
                          what="the dump screen")  # fmt: skip
        text = str(app.screen.query_one("#dump-text").content)
        assert (
            "== pid 4242 (main)" in text and "Module._call_impl" in text
        ) or "_try_get_data" in text
        await pilot.press("escape")
    (path,) = (tmp_path / "snapshots").glob("gputop-stacks-*.txt")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "== pid 5000 (worker)" in path.read_text()


async def test_d_is_dimmed_without_a_target(make_app):
    app = make_app()
    async with app.run_test():
        assert app.check_action("dump_stacks", ()) is None


SIZES = {"compact": (80, 24), "wide": (160, 48)}


@pytest.mark.parametrize("size", SIZES)
def test_stacks_pane_snapshot(snap_compare, make_app, size):
    window = stacks_window(error=DENIED)
    app = make_app(
        record("h100x2", "starved", ticks=10), stacks=FixedStacks(window),
        target=Target(4242, "python train.py"),
    )  # fmt: skip

    feed = fed(app, *(lambda s=s: app.take("stacks", s) for s in window))
    assert snap_compare(app, terminal_size=SIZES[size], run_before=feed)
