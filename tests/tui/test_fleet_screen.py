"""`gputop fleet`'s screen under Pilot: the nodes in the order read (the slow node first), the
status line naming the slow node, a failed reading said with the last rows kept, the slow row
in the error colour; the monitor's theme set-up and key bar; and a snapshot of the screen."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Static

from gputop.config import Config
from gputop.fleet.client import FleetError
from gputop.fleet.nodes import NodeRow
from gputop.ui.fleet_app import FleetApp
from gputop.ui.widgets import KeyBar, StatusLine

SIZES = {"compact": (80, 24), "wide": (160, 48)}


def row(
    instance: str, ratio: float, stuck: tuple[str, ...] = (), throttled: tuple[str, ...] = ()
) -> NodeRow:
    return NodeRow(instance, "llama", "gpu-compute", ("comms", 0.2), 0.1 * ratio, ratio,
                   ("0", 0.1 * ratio), stuck, throttled)  # fmt: skip


def shown(table: DataTable, i: int) -> list[str]:
    return [str(c) for c in table.get_row_at(i)]


@pytest.mark.asyncio
async def test_the_slow_node_is_the_first_row_and_a_failure_keeps_the_rows():
    answers: list[object] = [
        [row("node-3:9401", 1.3), row("node-1:9401", 1.0)],
        FleetError("cannot reach Prometheus at http://p:9090 (refused)"),
    ]

    def read() -> list[NodeRow]:
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    app = FleetApp(read, where="http://p:9090 llama", interval=3600)
    async with app.run_test(size=(140, 20)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = app.query_one(DataTable)
        assert [shown(table, i)[1] for i in range(table.row_count)] == [
            "node-3:9401",
            "node-1:9401",
        ]
        assert shown(table, 0)[0] == "SLOW"
        error = app.current_theme.error.lower()
        assert all(error in str(c.style).lower() for c in table.get_row_at(0))
        assert not any(hasattr(c, "style") for c in table.get_row_at(1))
        status = app.query_one("#fleet-status", Static)
        assert "slow: node-3:9401" in str(status.render())
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "cannot reach Prometheus" in str(status.render())
        assert table.row_count == 2


@pytest.mark.asyncio
async def test_the_config_chooses_the_theme_and_its_problems_are_said(tmp_path):
    """As on the monitor: mono colours mean the mono theme; a theme that is not found falls
    back to gputop's default and the status line says so; the key bar lists the keys."""
    mono = FleetApp(lambda: [], where="p", interval=3600, config=Config(color="mono"))
    async with mono.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert mono.theme == "gputop-mono" and not mono.query_one(StatusLine).display
        assert mono.query_one(KeyBar).text().strip() == "q Quit  r Refresh now"
    config = Config(theme="nope", themes_dir=tmp_path)
    lost = FleetApp(lambda: [], where="p", interval=3600, config=config)
    async with lost.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert lost.theme == "gputop-dark"
        status = lost.query_one(StatusLine)
        assert status.display and "theme 'nope' not found" in str(status.render())


@pytest.mark.parametrize("size", SIZES)
def test_fleet_screen_snapshot(snap_compare, size):
    """Four nodes: the slow one first in the error colour, one with a stuck rank and a
    throttled GPU in the warning colour, two plain."""
    rows = [
        row("10.0.0.13:9401", 1.31),
        row("10.0.0.12:9401", 1.02, stuck=("5",), throttled=("1",)),
        row("10.0.0.11:9401", 1.0),
        row("10.0.0.14:9401", 0.98),
    ]
    app = FleetApp(lambda: rows, where="http://prom:9090  llama", interval=3600)

    async def settle(pilot):
        await app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=settle)
