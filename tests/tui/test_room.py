"""The main screen uses its rows: attached to a two-rank job whose rank 1 is slow and which
saves a checkpoint every 30 s, a tall terminal shows the budget over time, each rank's bar and
each GPU's history, with no block of more than 2 empty rows; 80x24 gets none of them."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest
from builders import job_readings
from conftest import FixedAgents, ingest_all, record, screen_rows
from tests_support import longest_blank, until_drawn
from textual.screen import ModalScreen

from gputop.ui.app import Target
from gputop.ui.panes.chart import BudgetChart
from gputop.ui.panes.steps import RanksPane
from gputop.ui.widgets import GpuRow

SIZES = {"120x40": (120, 40), "200x50": (200, 50)}
JOB = "torchrun --nproc-per-node 2 train.py"


def scene():
    """Two H100s' readings, and five minutes of a two-rank job's whose rank 1 is slow and
    which saves a checkpoint every 30 s (docs/make_screenshot.py draws the same)."""
    gpus = record("h100x2", "compute", ticks=45, step=0.9)
    return gpus, list(job_readings(every_save=30, seconds=300, ranks=2, slow_rank=1, t0=1000.0))


async def feed_job(app, pilot, readings) -> None:
    """Every GPU reading, then the job's: the session files them all, the screen draws the
    last; the rows are shared out once the panes were measured (a frame later)."""
    await ingest_all(app, pilot)
    for r in readings[:-1]:
        app.session.take("agents", r, evaluate=False)
    app.take("agents", readings[-1])
    await pilot.pause()
    await pilot.pause()


def attached(make_app, config=None):
    """The app attached to the job, and a run_before that feeds it the scene's readings."""
    gpus, readings = scene()
    app = make_app(
        gpus,
        config=config,
        agents=FixedAgents(readings[-1]),
        target=Target(7000, JOB),
    )

    async def feed(pilot) -> None:
        await feed_job(app, pilot, readings)

    return app, feed


def bar(rank_line: str) -> str:
    """A rank line's stacked bar (after its sync wait)."""
    found = re.search(r" ms  ([█a-zA-Z]{12,})  ", rank_line)
    assert found, rank_line
    return found.group(1)


@pytest.mark.parametrize("size", SIZES)
async def test_a_tall_terminal_fills_its_rows(make_app, size):
    app, feed = attached(make_app)
    async with app.run_test(size=SIZES[size]) as pilot:
        await feed(pilot)
        rows = screen_rows(app)
        assert longest_blank(rows) <= 2, "\n".join(rows)
        chart = app.query_one(BudgetChart)
        assert chart.display and chart.rows >= 6
        plot = chart.text()
        assert "budget per 5 s" in plot and "S straggler" in plot and "k checkpoint" in plot
        columns = "".join(plot.splitlines()[1:-1])
        assert "S" in columns and "s" not in columns  # the principal's slice in capitals
        assert all(row.history_rows == 4 for row in app.query(GpuRow))
        assert all("held" in row.text() and "SM clk" in row.text() for row in app.query(GpuRow))
        bars = [bar(line) for line in app.query_one(RanksPane).text().splitlines()]
        assert "S" in bars[0] and "s" not in bars[0]  # rank 0 waits for rank 1
        assert "█" in bars[1] and "S" not in bars[1]  # the slow rank waits for nobody


async def test_the_checkpoint_is_a_column_every_six_intervals(make_app):
    app, feed = attached(make_app)
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot)
        plot = app.query_one(BudgetChart).text().splitlines()[1:-1]
        cols = ["".join(row[i] for row in plot) for i in range(len(plot[0]))]
        saved = [i for i, c in enumerate(cols) if "k" in c]
        assert len(saved) >= 8
        assert {b - a for a, b in pairwise(saved)} == {6}


async def test_80x24_shows_no_chart_and_no_history_and_a_resize_brings_them(make_app):
    app, feed = attached(make_app)
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot)
        assert not app.query_one(BudgetChart).display
        assert all(row.history_rows == 0 for row in app.query(GpuRow))
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        await pilot.pause()
        assert app.query_one(BudgetChart).display
        assert all(row.history_rows == 4 for row in app.query(GpuRow))
        assert longest_blank(screen_rows(app)) <= 2
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        assert not app.query_one(BudgetChart).display
        assert all(row.history_rows == 0 for row in app.query(GpuRow))


@pytest.mark.parametrize("size", SIZES)
async def test_eight_gpus_with_no_target_fill_the_rows_with_history(make_app, size):
    app = make_app(record("h100x8", "power-throttled", ticks=45, step=0.9))
    async with app.run_test(size=SIZES[size]) as pilot:
        await ingest_all(app, pilot)
        await pilot.pause()
        rows = screen_rows(app)
        assert longest_blank(rows) <= 2, "\n".join(rows)
        assert all(row.history_rows >= 1 for row in app.query(GpuRow))
        assert all("held" in row.text() for row in app.query(GpuRow))  # throttled: second


@pytest.mark.parametrize("size", SIZES)
def test_full_screen_snapshot(snap_compare, make_app, size):
    app, feed = attached(make_app)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=feed)


def test_full_screen_mono_snapshot(snap_compare, make_app, tmp_path):
    """Black and white (NO_COLOR): the letters and capitals carry what the colours did."""
    from gputop.config import Config

    config = Config(theme="gputop-mono", snapshot_dir=tmp_path, themes_dir=tmp_path / "none")
    app, feed = attached(make_app, config)
    assert snap_compare(app, terminal_size=(120, 40), run_before=feed)


@pytest.mark.parametrize("size", SIZES)
async def test_a_job_without_an_agent_gives_its_gpu_the_rows(make_app, size):
    """Attached to a plain job (its tree and stacks, no agent yet): no chart to draw, so the
    GPU's history takes the rows: memory, temperature, DRAM, then a taller activity graph."""
    from conftest import FixedHost, FixedStacks, host_sample, stacks_window

    from gputop.model.steps import AgentsSample

    window = stacks_window()
    none = AgentsSample(target=4242, t=0.0, wall=0.0, agents=())
    app = make_app(
        record("h100", "starved", ticks=45, step=0.9),
        host=FixedHost(host_sample()),
        stacks=FixedStacks(window),
        agents=FixedAgents(none),
        target=Target(4242, "python train.py"),
    )
    async with app.run_test(size=SIZES[size]) as pilot:
        await ingest_all(app, pilot)
        app.take("host", host_sample())
        app.take("agents", none)
        for sample in window:
            app.take("stacks", sample)
        await pilot.pause()
        await pilot.pause()
        rows = screen_rows(app)
        assert longest_blank(rows) <= 2, "\n".join(rows)
        assert not app.query_one(BudgetChart).display
        row = app.query_one(GpuRow)
        assert row.history_rows > 7
        assert all(name in row.text() for name in ("SM clk", "held", "memory", "temp", "dram"))


@pytest.mark.parametrize("gpus", ["h100x2", "h100x8"])
async def test_80x24_attached_to_ranks_keeps_the_key_bar_and_a_line_per_gpu(make_app, gpus):
    """A tmux pane beside a two-rank job: every pane has something to say (verdict, host,
    steps, ranks, stacks), and still the way out (``q Quit``, ``? more keys``) and each GPU's
    first line are on screen; the panes give up their rows first."""
    from conftest import FixedHost, FixedStacks, host_sample, stacks_window

    window = stacks_window()
    _, readings = scene()
    app = make_app(
        record(gpus, "compute", ticks=20, step=0.9),
        host=FixedHost(host_sample()),
        stacks=FixedStacks(window),
        agents=FixedAgents(readings[-1]),
        target=Target(7000, JOB),
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await feed_job(app, pilot, readings)
        app.take("host", host_sample())
        for sample in window:
            app.take("stacks", sample)
        await pilot.pause()
        await pilot.pause()
        rows = screen_rows(app)
        screen = "\n".join(rows)
        assert "q Quit" in rows[-1] and "? more keys" in rows[-1], screen
        for row in app.query(GpuRow):
            first = row.text().splitlines()[0]
            assert first[:30] in screen, f"GPU {row.info.index} not on screen:\n{screen}"
        assert "STRAGGLER" in screen and "try:" in screen, screen  # the verdict whole


class ClosedUnrefreshed(ModalScreen[None]):
    """A question closed before it refreshed: what was to run after its refresh never runs."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped: list[object] = []

    def _invoke_later(self, callback, sender) -> None:
        self.dropped.append(callback)


async def test_rows_are_shared_after_a_question_closes(make_app):
    """A reading drawn while a question is on the screen (key a's "Load gputop's agent?")
    asks for the rows to be shared once that screen has refreshed; a screen closed before it
    refreshed drops what it was asked (Textual keeps such callbacks per screen). The next
    reading asks again: the chart comes when the steps do (it never came, once, in CI)."""
    gpus, readings = scene()
    app = make_app(gpus, agents=FixedAgents(readings[-1]), target=Target(7000, JOB))
    async with app.run_test(size=(120, 40)) as pilot:
        await ingest_all(app, pilot)
        assert not app.query_one(BudgetChart).display  # no steps yet
        question = ClosedUnrefreshed()
        await app.push_screen(question)
        for r in readings[:-2]:
            app.session.take("agents", r, evaluate=False)
        app.take("agents", readings[-2])  # drawn under the question
        await until_drawn(pilot, lambda: question.dropped, what="the rows asked of the question")
        app.pop_screen()
        app.take("agents", readings[-1])
        await pilot.pause()
        await pilot.pause()
        chart = app.query_one(BudgetChart)
        assert chart.display and chart.rows >= 6
