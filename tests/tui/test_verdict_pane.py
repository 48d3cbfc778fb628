"""The verdict pane: what it says for different bounds, and the full reasoning screen."""

from __future__ import annotations

import pytest
from conftest import FixedAgents, FixedHost, agents_sample, host_sample, ingest_all, record
from tests_support import until_drawn

from gputop.ui.panes.verdict import VerdictPane


def pane(app) -> str:
    return app.query_one(VerdictPane).text()


@pytest.mark.parametrize(
    ("scenario", "words"),
    [
        ("power-throttled", "THROTTLED-POWER"),
        ("thermal-throttled", "THROTTLED-THERMAL"),
        ("membw", "MEMORY-BANDWIDTH"),
        ("launch-bound", "HOST-OVERHEAD"),
        ("compute", "GPU-COMPUTE"),
    ],
)
async def test_gpu_side_verdicts(make_app, scenario, words):
    app = make_app(record("h100x2", scenario, ticks=20))
    async with app.run_test(size=(160, 48)) as pilot:
        await ingest_all(app, pilot)
        text = pane(app)
        assert words in text and "confidence" in text and "try:" in text


async def test_data_input_verdict_names_the_loader_setting(make_app):
    app = make_app(
        record("h100", "starved", ticks=20), agents=FixedAgents(agents_sample(data_ms=80))
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await ingest_all(app, pilot)
        app.take("agents", agents_sample(data_ms=80))
        await pilot.pause()
        text = pane(app)
        assert "DATA-INPUT" in text
        assert "batch wait" in text and "[agent]" in text
        assert "DataLoader num_workers=0" in text


async def test_host_verdict_with_a_secondary_finding(make_app):
    # the sample's working set is 29 of 32 GiB (> 90%) and the cgroup throttles 62% of periods
    app = make_app(record("h100", "starved", ticks=10), host=FixedHost(host_sample()))
    async with app.run_test(size=(160, 48)) as pilot:
        await ingest_all(app, pilot)
        app.take("host", host_sample())
        await pilot.pause()
        text = pane(app)
        assert "HOST-MEMORY-PRESSURE" in text and "working set 29.0 GiB of 32.0 GiB" in text
        assert "also: cpu-oversubscribed" in text


async def test_compact_terminal_keeps_the_verdict_short_and_whole(make_app):
    """80x24: three lines at most, and the bound's summary whole (it was cut at the edge)."""
    app = make_app(record("h100x8", "power-throttled", ticks=10))
    async with app.run_test(size=(80, 24)) as pilot:
        await ingest_all(app, pilot)
        text = pane(app)
        assert len(text.splitlines()) <= 3
        assert all(len(line) <= 79 for line in text.splitlines())
        words = " ".join(text.split())
        assert "THROTTLED-POWER" in words and app.session.state.verdict.principal.summary in words
        assert app.query_one("#gpu-7").region.bottom <= 23  # eight GPUs still fit


async def test_v_opens_every_rule_with_its_numbers(make_app):
    app = make_app(record("h100x2", "power-throttled", ticks=10))
    async with app.run_test(size=(120, 40)) as pilot:
        await ingest_all(app, pilot)
        await pilot.press("v")
        await until_drawn(pilot, lambda: bool(app.screen.query("#dump-text")),
                          what="the why screen")  # fmt: skip
        text = str(app.screen.query_one("#dump-text").content)
        assert "[FIRED" in text and "throttled-power" in text
        assert text.count("[not fired]") >= 8  # the rules that did not fire are listed too
        assert "(without: agent" in text
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
