"""The step and ranks panes: Pilot and snapshots, from hand-built agent states."""

from __future__ import annotations

import pytest
from conftest import FixedAgents, agents_sample, ingest_all, record

from gputop.ui.app import Target
from gputop.ui.panes.steps import RanksPane, StepPane
from gputop.ui.panes.verdict import VerdictPane

SIZES = {"compact": (80, 24), "wide": (160, 48)}


async def test_step_pane_splits_the_step_in_pipeline_order(make_app):
    sample = agents_sample()
    app = make_app(record("h100", "starved", ticks=5), agents=FixedAgents(sample))
    async with app.run_test(size=(160, 48)) as pilot:
        await ingest_all(app, pilot)
        app.take("agents", sample)
        await pilot.pause()
        text = app.query_one(StepPane).text()
        assert "#39  step 102 ms" in text
        assert "samples/s" in text and "tok/s" in text and "MFU" in text
        order = [text.index(f" {name} ") for name in ("data", "h2d", "fwd", "bwd", "opt")]
        assert order == sorted(order)  # batch wait -> H2D -> forward -> backward -> optimizer
        assert "now forward for" in text
        assert "workers 0 pin False" in text and "torch threads 8" in text
        assert not app.query_one(RanksPane).display  # one rank: no ranks pane


async def test_ranks_pane_names_the_slow_rank(make_app):
    sample = agents_sample(ranks=4, slow_rank=2)
    app = make_app(record("h100x4", "compute", ticks=5), agents=FixedAgents(sample))
    async with app.run_test(size=(160, 48)) as pilot:
        await ingest_all(app, pilot)
        app.take("agents", sample)
        await pilot.pause()
        ranks = app.query_one(RanksPane)
        assert ranks.display
        lines = ranks.text().splitlines()
        assert len(lines) == 4
        assert "slowest" in lines[2] and all(
            "slowest" not in x for i, x in enumerate(lines) if i != 2
        )
        assert "rank   0" in lines[0]


async def test_no_agent_leaves_the_panes_hidden(make_app):
    from gputop.model.steps import AgentsSample

    empty = AgentsSample(target=1, t=0.0, wall=0.0, agents=())
    app = make_app(agents=FixedAgents(empty))
    async with app.run_test() as pilot:
        app.take("agents", empty)
        await pilot.pause()
        assert not app.query_one(StepPane).display and not app.query_one(RanksPane).display


@pytest.mark.parametrize("size", SIZES)
def test_step_and_ranks_snapshot(snap_compare, make_app, size):
    sample = agents_sample(ranks=2, slow_rank=1)
    app = make_app(
        record("h100x2", "compute", ticks=20, step=0.9),
        agents=FixedAgents(sample),
        target=Target(7000, "torchrun --nproc-per-node 2 train.py"),
    )

    async def feed(pilot):
        await ingest_all(app, pilot)
        app.take("agents", sample)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=feed)


async def test_the_straggler_cause_shows_at_80x24_without_the_why_screen(make_app):
    sample = agents_sample(ranks=2, slow_rank=1, data_ms=1.0, slow_inputs=2.0)
    app = make_app(record("h100x2", "compute", ticks=20, step=0.9), agents=FixedAgents(sample))
    async with app.run_test(size=(80, 24)) as pilot:
        await ingest_all(app, pilot)
        app.take("agents", sample)
        await pilot.pause()
        text = app.query_one(VerdictPane).text()
    assert "STRAGGLER" in text, text
    assert "why: rank 1's inputs are 2.0x the others'" in text, text
    # sized by the rank differential: rank 1's extra compute, a little under the others' wait
    assert "try (~1.5x): balance the work per rank" in text, text


def test_straggler_cause_snapshot(snap_compare, make_app):
    sample = agents_sample(ranks=2, slow_rank=1, data_ms=1.0, slow_inputs=2.0)
    app = make_app(
        record("h100x2", "compute", ticks=20, step=0.9),
        agents=FixedAgents(sample),
        target=Target(7000, "torchrun --nproc-per-node 2 train.py"),
    )

    async def feed(pilot):
        await ingest_all(app, pilot)
        app.take("agents", sample)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=feed)
