"""Every key and pane of the live monitor, driven with Textual's Pilot."""

from __future__ import annotations

import json
import os
import stat

from conftest import WALL0, ingest_all, record, snapshot_dir_files
from tests_support import until_drawn

from gputop.config import Config
from gputop.ui.app import GputopApp
from gputop.ui.screens.detail import DetailScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.widgets import GpuRow, HeaderLine, SimBanner, StatusLine


def header(app: GputopApp) -> str:
    return str(app.query_one(HeaderLine).render())


def row_text(app: GputopApp, index: int) -> str:
    return app.query_one(f"#gpu-{index}", GpuRow).text()


async def test_panes_show_every_gpu_and_the_simulated_banner(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ingest_all(app, pilot)
        assert len(app.query(GpuRow)) == 8
        assert "SIMULATED 8x H100 80GB HBM3" in str(app.query_one(SimBanner).render())
        h = header(app)
        assert "no target" in h and "8x H100 80GB HBM3" in h and "every 2s" in h
        line = row_text(app, 3)
        assert line.startswith("  3 H100 80GB HBM3 SM 1980/1980MHz")  # the mark's column, blank
        assert "SMact" in line and "tens" in line and "dram" in line
        assert not app.query_one(StatusLine).display
        for i in range(8):  # all eight fit on an 80x24 screen
            assert app.query_one(f"#gpu-{i}", GpuRow).region.bottom <= 23


async def test_rows_without_gpm_say_so_and_show_memory_busy(make_app):
    app = make_app(record("a100x2", "membw", ticks=5))
    async with app.run_test(size=(80, 24)) as pilot:
        await ingest_all(app, pilot)
        line = row_text(app, 0)
        assert "mem-busy" in line and "SMact  n/a" in line


async def test_throttling_is_named_in_the_row(make_app):
    app = make_app(record("h100x2", "power-throttled", ticks=10))
    async with app.run_test(size=(80, 24)) as pilot:
        await ingest_all(app, pilot)
        assert "held: POWER CAP" in row_text(app, 1)


async def test_lost_gpu_row_says_so(make_app):
    import pynvml as N

    from gputop.sim import Fault, SimBoard, installed
    from gputop.sources.nvml import NvmlSource

    clock = [0.0]
    board = SimBoard("t4x2", clock=lambda: clock[0])
    with installed(board):
        src = NvmlSource.open(clock=lambda: clock[0])
        board.faults.append(Fault(code=N.NVML_ERROR_GPU_IS_LOST, device=1))
        clock[0] = 1.0
        samples = src.sample()
    app = GputopApp(src, start_sampler=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.take("gpu", samples)
        await pilot.pause()
        assert "LOST: GPU is lost (fell off the bus)" in row_text(app, 1)
        assert "SM " in row_text(app, 0)


async def test_wide_terminal_adds_fixed_scale_history(make_app):
    app = make_app(record("h100x2", "compute", ticks=40))
    async with app.run_test(size=(160, 48)) as pilot:
        await ingest_all(app, pilot)
        line = row_text(app, 0)
        assert "SMact" in line and "█" * 30 in line  # a steady 93% is a steady bar


async def test_q_quits(make_app):
    app = make_app()
    async with app.run_test() as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


async def test_pause_freezes_the_display_but_keeps_collecting(make_app):
    rec = record("h100", "starved", ticks=20, step=0.37)
    app = make_app(rec)
    async with app.run_test() as pilot:
        app.take("gpu", rec.history[0])
        await pilot.pause()
        before = row_text(app, 0)
        await pilot.press("space")
        assert "PAUSED" in header(app)
        for samples in rec.history[1:]:
            app.take("gpu", samples)
        await pilot.pause()
        assert row_text(app, 0) == before
        assert len(app.session.timeline) == 20  # nothing was lost while paused
        await pilot.press("p")
        await pilot.pause()
        assert "PAUSED" not in header(app)
        assert row_text(app, 0) != before


async def test_help_lists_every_key_with_its_id_and_closes(make_app):
    app = make_app(record("t4", "idle", ticks=2))
    async with app.run_test(size=(120, 40)) as pilot:
        await ingest_all(app, pilot)
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            keys = app.screen.query_one("#help-keys").content
            text = _plain(keys)
            for b in app.BINDINGS:
                if b.id == "load_agent":  # only where an agent can be loaded (gputop --pid)
                    assert app.agent_loading is None and "load_agent" not in text
                    continue
                assert b.id in text
            assert "not now: only one GPU" in text  # next/prev GPU are dimmed, and why
            panes = _plain(app.screen.query_one("#help-panes").content)
            assert "SIMULATED" in panes and "GPU row, line 2" in panes
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, HelpScreen)


def _plain(renderable) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


async def test_next_and_previous_gpu_move_the_selection(make_app):
    app = make_app()
    async with app.run_test() as pilot:
        await ingest_all(app, pilot)
        assert app.query_one("#gpu-0").has_class("-selected")
        await pilot.press("j", "down")
        assert app.selected == 2 and app.query_one("#gpu-2").has_class("-selected")
        await pilot.press("k")
        assert app.selected == 1
        await pilot.press("up", "up")
        assert app.selected == 7  # wraps around


def _detail_drawn(app) -> bool:
    """The detail screen is open and has drawn its GPU's facts."""
    facts = app.screen.query("#detail-facts") if isinstance(app.screen, DetailScreen) else None
    return bool(facts) and bool(facts.first().content)


async def test_enter_opens_the_detail_of_the_selected_gpu(make_app):
    app = make_app(record("h100x2", "power-throttled", ticks=30))
    async with app.run_test(size=(120, 60)) as pilot:
        await ingest_all(app, pilot)
        await pilot.press("j", "enter")
        await until_drawn(pilot, lambda: _detail_drawn(app), what="the detail screen drawn")
        assert isinstance(app.screen, DetailScreen) and app.screen.index == 1
        facts = _plain(app.screen.query_one("#detail-facts").content)
        assert "1  NVIDIA H100 80GB HBM3  00000000:64:00.0" in facts
        assert "sw_power_cap: clocks cut to stay under the power limit" in facts
        assert "default 700 W" in facts
        chart = _plain(app.screen.query_one("#detail-activity").content)
        assert "activity" in chart and "100" in chart
        assert app.check_action("detail", ()) is None  # already open: dimmed
        await pilot.press("k")
        assert app.screen.index == 0
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DetailScreen)


async def test_t_cycles_through_the_bundled_themes(make_app):
    app = make_app()
    async with app.run_test() as pilot:
        assert app.theme == "gputop-dark"
        seen = []
        for _ in range(len(app.gputop_themes)):
            await pilot.press("t")
            seen.append(app.theme)
        assert set(seen) == {"gputop-dark", "gputop-light", "gputop-mono", "gputop-ansi"}
        assert seen[-1] == "gputop-dark"


async def test_interval_keys_step_and_stop_at_the_limits(make_app):
    app = make_app()
    async with app.run_test() as pilot:
        await pilot.press("plus")
        assert app.interval == 3.0 and "every 3s" in header(app)
        await pilot.press("minus", "minus", "minus", "minus")
        assert app.interval == 0.5
        assert app.check_action("faster", ()) is None  # dimmed in the footer
        await pilot.press("minus")
        assert app.interval == 0.5
        for _ in range(8):
            await pilot.press("equals_sign")
        assert app.interval == 10.0 and app.check_action("slower", ()) is None


async def test_s_saves_a_private_json_snapshot(make_app, tmp_path):
    app = make_app(record("h100x2", "compute", ticks=3))
    async with app.run_test() as pilot:
        assert app.check_action("save_snapshot", ()) is None  # nothing to save yet
        await ingest_all(app, pilot)
        await pilot.press("s")
        await pilot.pause()
    (path,) = snapshot_dir_files(tmp_path / "snapshots")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 1 and len(doc["devices"]) == 2
    assert doc["source"]["kind"] == "simulated"
    assert doc["devices"][0]["sample"]["sm_clock_mhz"] == 1980
    assert path.name.startswith("gputop-snapshot-") and not list(path.parent.glob("*.partial"))
    assert doc["devices"][0]["sample"]["wall"] == WALL0 + 1006.0  # the reading, not "now"


async def test_save_failure_is_one_message_not_a_crash(make_app, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    config = Config(snapshot_dir=blocker / "sub", themes_dir=tmp_path / "none")
    app = make_app(record("t4", ticks=2), config=config)
    async with app.run_test() as pilot:
        await ingest_all(app, pilot)
        await pilot.press("s")
        await pilot.pause()
        assert app.is_running
        (note,) = list(app._notifications)
        assert "could not save the snapshot" in note.message and note.severity == "error"


async def test_keys_are_remapped_from_the_config_file(make_app, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[keys]\nquit = "w"\npause = "z"\n')
    from gputop.config import load_config

    config = load_config(cfg)
    assert config.problems == ()
    app = make_app(config=config)
    async with app.run_test() as pilot:
        await pilot.press("p")  # no longer pause's
        assert not app.paused and app.is_running
        await pilot.press("z")
        assert app.paused
        await pilot.press("w")
        await pilot.pause()
    assert not app.is_running
    app = make_app(config=config)
    async with app.run_test() as pilot:
        await pilot.press("q")  # q quits whatever quit is mapped to
        await pilot.pause()
    assert not app.is_running


async def test_single_gpu_dims_gpu_navigation(make_app):
    app = make_app(record("t4", ticks=2))
    async with app.run_test() as pilot:
        await ingest_all(app, pilot)
        assert app.check_action("next_gpu", ()) is None
        assert app.check_action("prev_gpu", ()) is None
        assert app.check_action("quit", ()) is True


async def test_broken_theme_file_is_reported_once_and_skipped(make_app, tmp_path):
    themes = tmp_path / "themes"
    themes.mkdir()
    (themes / "bad.toml").write_text("name = 'bad'\n[textual]\nprimary = 'not-a-colour'\n")
    (themes / "mine.toml").write_text("name = 'mine'\n[textual]\nprimary = '#123456'\n")
    config = Config(themes_dir=themes, theme="mine", snapshot_dir=tmp_path)
    app = make_app(config=config)
    async with app.run_test() as pilot:
        await pilot.pause()
        status = str(app.query_one(StatusLine).render())
        assert status.count("bad.toml") == 1 and "is not a colour" in status
        assert app.theme == "mine"


async def test_source_trouble_shows_in_the_status_line_and_clears(make_app):
    from gputop.ui.messages import SourceTrouble

    app = make_app()
    async with app.run_test() as pilot:
        app.post_message(SourceTrouble("NVML has not answered for over 2 s"))
        await pilot.pause()
        status = app.query_one(StatusLine)
        assert status.display and "NVML has not answered" in str(status.render())
        app.post_message(SourceTrouble(""))
        await pilot.pause()
        assert not status.display


async def test_live_sampler_thread_feeds_the_rows():
    from gputop.sim import SimBoard, installed
    from gputop.sources.nvml import NvmlSource

    with installed(SimBoard("t4", scenario="compute")):
        src = NvmlSource.open()
        app = GputopApp(src, config=Config(interval=0.5))
        async with app.run_test() as pilot:
            await until_drawn(pilot, lambda: len(app.session.timeline) >= 2, timeout=20,
                              what="two readings from the sampler thread")  # fmt: skip
            assert "SM 1590/1590MHz" in row_text(app, 0)
        src.close()
