"""A pane is one module of ``gputop/ui/panes``: a module put there (here, a folder added to the
package's path for the test) is found, composed in its order, and drawn from each session
state it reads, with nothing else touched; one whose source the target lacks is not shown."""

from __future__ import annotations

import textwrap

import pytest
from conftest import ingest_all, record

import gputop.ui.panes as panes

CLOCK = '''
"""A pane that says how many GPU readings the session holds (the test's added pane)."""

from rich.text import Text

from gputop.ui.panes.pane import Pane


class ReadingsPane(Pane):
    """The GPU readings the session holds."""

    ORDER = 15  # after the verdict, before the host
    READS = frozenset({"gpu"})

    def __init__(self) -> None:
        super().__init__(id="readings")
        self.count = 0

    def draw(self, state, context) -> None:
        self.count = len(state.gpus)
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        return [Text(f" readings of {self.count} GPU(s)")]


class AgentsOnlyPane(Pane):
    """Needs the agents: never on a screen without a target."""

    ORDER = 16
    SOURCE = "agents"

    def build_lines(self, width: int) -> list[Text]:
        return [Text(" agents only")]
'''


@pytest.fixture
def added_pane(tmp_path, monkeypatch):
    (tmp_path / "readings.py").write_text(textwrap.dedent(CLOCK))
    monkeypatch.setattr(panes, "__path__", [*panes.__path__, str(tmp_path)])
    panes.discovered.cache_clear()
    yield
    panes.discovered.cache_clear()


async def test_a_module_added_to_the_panes_is_composed_in_order_and_drawn(added_pane, make_app):
    found = panes.discovered()
    names = [p.__name__ for p in found]
    assert [p.ORDER for p in found] == sorted(p.ORDER for p in found)
    assert names.index("ReadingsPane") == len([p for p in found if p.ORDER < 15])
    app = make_app(record("h100x2", "compute", ticks=5))
    async with app.run_test(size=(120, 40)) as pilot:
        await ingest_all(app, pilot)
        shown = [type(w).__name__ for w in app.query_one("#panes").children]
        assert shown[:2] == ["VerdictPane", "ReadingsPane"], shown
        assert "AgentsOnlyPane" not in shown  # no target: no agents
        assert app.query_one("#readings").text() == " readings of 2 GPU(s)"
