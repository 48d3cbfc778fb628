"""`gputop fleet`'s screen under Pilot: the nodes in the order read (the slow node first), the
status line naming the slow node, and a failed reading said with the last rows kept."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Static

from gputop.fleet.client import FleetError
from gputop.fleet.nodes import NodeRow
from gputop.ui.fleet_app import FleetApp


def row(instance: str, ratio: float) -> NodeRow:
    return NodeRow(instance, "llama", "gpu-compute", ("comms", 0.2), 0.1 * ratio, ratio,
                   ("0", 0.1 * ratio), (), ())  # fmt: skip


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
        assert [table.get_row_at(i)[1] for i in range(table.row_count)] == [
            "node-3:9401",
            "node-1:9401",
        ]
        assert table.get_row_at(0)[0] == "SLOW"
        status = app.query_one("#fleet-status", Static)
        assert "slow: node-3:9401" in str(status.render())
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "cannot reach Prometheus" in str(status.render())
        assert table.row_count == 2
