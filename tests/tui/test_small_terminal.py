"""80x24 and the habits of htop/nvitop users (issue 18 item 5), and the screen after the job
of `gputop run` ended (item 8)."""

from __future__ import annotations

import sys
from dataclasses import replace

from conftest import FixedAgents, agents_sample, host_sample, ingest_all, record
from rich.style import Style

from gputop.config import Config
from gputop.run import Job
from gputop.ui.app import Target
from gputop.ui.panes.host import host_lines
from gputop.ui.panes.steps import StepPane
from gputop.ui.screens.help import HelpScreen
from gputop.ui.widgets import SELECTED, GpuRow, KeyBar, StatusLine


def bar(app) -> str:
    return app.query_one(KeyBar).text()


def status(app) -> str:
    line = app.query_one(StatusLine)
    return str(line.render()) if line.display else ""


async def test_the_key_bar_fits_80_columns_and_points_to_the_rest(make_app):
    app = make_app(record("h100x2", "power-throttled", ticks=5))
    async with app.run_test(size=(80, 24)) as pilot:
        await ingest_all(app, pilot)
        text = bar(app)
        assert len(text) <= 78 and text.endswith("? more keys")  # nothing cut at the edge
        for key in ("q Quit", "space Pause", "j/k GPU", "v Why", "s Save"):
            assert key in text
    wide = make_app(record("h100x2", "power-throttled", ticks=5))
    async with wide.run_test(size=(200, 40)) as pilot:
        await ingest_all(wide, pilot)
        text = bar(wide)  # room for all: the capture keys too, dim while they cannot work
        assert "f Flame" in text and "c Capture" in text and "more keys" not in text


async def test_the_selected_gpu_is_marked_and_j_k_move_the_mark(make_app):
    for theme in ("gputop-dark", "gputop-mono"):
        config = Config(theme=theme)
        app = make_app(record("h100x2", "power-throttled", ticks=5), config=config)
        async with app.run_test(size=(80, 24)) as pilot:
            await ingest_all(app, pilot)
            rows = list(app.query(GpuRow))
            assert [r.text()[0] for r in rows] == [SELECTED, " "], theme
            await pilot.press("j")
            assert [r.text()[0] for r in rows] == [" ", SELECTED], theme
            assert rows[1].has_class("-selected") and not rows[0].has_class("-selected")
            await pilot.press("k")
            assert [r.text()[0] for r in rows] == [SELECTED, " "], theme


async def test_a_key_that_cannot_work_now_says_why_on_the_status_line(make_app):
    app = make_app(record("h100x2", "power-throttled", ticks=5))  # no target
    async with app.run_test(size=(80, 24)) as pilot:
        await ingest_all(app, pilot)
        assert status(app) == ""
        await pilot.press("f")
        await pilot.pause()
        assert "needs a target" in status(app) and "f (Flame)" in status(app)
        await pilot.press("x")
        await pilot.pause()
        assert "no capture running" in status(app)


async def test_h_opens_help_f10_and_ctrl_c_quit_without_a_job(make_app):
    app = make_app(record("h100x2", "power-throttled", ticks=5))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("h")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("h")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f10")
        await pilot.pause()
        assert app.return_code == 0 and not app.is_running
    app = make_app(record("h100x2", "power-throttled", ticks=5))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running


def test_an_exited_target_mentions_gpu_rows_only_where_there_are_some():
    exited = host_sample("exited")
    plain = host_lines(exited, lambda _: Style(), 80, gpus=0)[0].plain
    assert "exited with status 137" in plain and "GPU" not in plain
    assert "the GPU rows go on" in host_lines(exited, lambda _: Style(), 80, gpus=2)[0].plain


async def test_after_the_job_ended_the_phase_stops_counting_and_q_is_offered(make_app, tmp_path):
    job = Job([sys.executable, "-c", "raise SystemExit(3)"], log=tmp_path / "job.log")
    job.wait()
    sample = agents_sample()
    waiting = replace(sample.agents[0], open_phase="data_wait", open_age_s=589.6)
    sample = replace(sample, agents=(waiting,))
    app = make_app(
        record("h100", "starved", ticks=5),
        agents=FixedAgents(sample),
        job=job,
        target=Target(job.pid, "python train.py"),
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await ingest_all(app, pilot)
        app.take("agents", sample)
        await pilot.pause()
        steps = app.query_one(StepPane).text()
        assert "the job ended (status 3); its last phase was data_wait" in steps
        assert "589.6" not in steps
        assert "the job ended (status 3): q quits" in status(app)
        await pilot.press("ctrl+c")  # nothing to interrupt any more: quits
        await pilot.pause()
        assert not app.is_running


def test_long_lines_end_at_a_word_with_an_ellipsis():
    from rich.text import Text

    from gputop.ui.line_fit import ellipsize

    line = Text(" stacks 4242 MainThread   data wait       next (dataloader.py:631)  [data wait")
    line.append(" 80% compute 20%]", style="bold")
    cut = ellipsize(line, 60).plain
    assert cut == " stacks 4242 MainThread   data wait       next…"
    assert ellipsize(line, 200) is line


def test_stack_lines_fit_80_columns():
    from conftest import stacks_window

    from gputop.ui.panes.stacks import _stack_lines, stack_lines

    whole = _stack_lines(stacks_window(), lambda _: Style(), short=True)
    cut = stack_lines(stacks_window(), lambda _: Style(), 79)
    assert len(cut) == len(whole)
    for text, full in zip(cut, whole, strict=True):
        assert len(text.plain) <= 79
        assert full.plain.startswith(text.plain.rstrip("…"))  # cut at the end, never changed
        if text.plain.endswith("…"):
            assert full.plain[len(text.plain) - 1] in " .("  # at a word (or a name's part)


def test_the_keymap_check_accepts_every_default_written_out():
    """h, F10 and ctrl+c as defaults: a config that spells out every default is taken whole."""
    from gputop.ui.app import GputopApp
    from gputop.ui.keymap import checked_keymap
    from gputop.ui.replay_app import ReplayApp

    for app in (GputopApp, ReplayApp):
        bindings = [b for cls in (GputopApp, app) for b in cls.BINDINGS]
        wanted = {b.id: b.key for b in bindings}
        keymap, problems = checked_keymap(wanted, bindings)
        assert problems == [] and set(keymap) == set(wanted)
        assert "f10" in keymap["quit"] and "h" in keymap["help"].split(",")
