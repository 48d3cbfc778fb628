"""The budget over time as a chart of columns (``ui/budget_cells.py``): where each interval's
step time went, the principal's slice in capitals, a mark under each shift of step time."""

from __future__ import annotations

from rich.text import Text

from gputop.diagnose import Interval
from gputop.session import SessionState
from gputop.ui.budget_cells import chart_cells, runs
from gputop.ui.panes.pane import Context, Pane


class BudgetChart(Pane):
    """The budget over time (``ui/budget_cells.py``): shown when the screen has rows for it
    (``ui/room.py``), redrawn when an interval closed, the principal changed or the size did."""

    ORDER = 60
    SOURCE = "agents"

    def draw(self, state: SessionState, context: Context) -> None:
        if state.agents is not None:
            self.show(state.intervals, context.principal, tuple(t for _, _, t in state.shifts))

    def __init__(self) -> None:
        super().__init__(id="budget-chart")
        self.intervals: tuple[Interval, ...] = ()
        self.principal: str | None = None
        self.shifts: tuple[float, ...] = ()
        self.rows = 0
        self.display = False

    def show(
        self, intervals: tuple[Interval, ...], principal: str | None, shifts: tuple[float, ...] = ()
    ) -> None:
        if intervals is self.intervals and principal == self.principal and shifts == self.shifts:
            return
        self.intervals, self.principal, self.shifts = intervals, principal, shifts
        if self.rows:
            self.changed()

    def set_rows(self, rows: int) -> None:
        """The rows the chart is given, its border included (0: hidden)."""
        if rows != self.rows:
            self.rows = rows
            self.display = rows > 0
            if rows:
                self.styles.height = rows
            self.changed()

    def cache_key(self, width: int) -> object:
        return width, self.rows

    def build_lines(self, width: int) -> list[Text]:
        cells = chart_cells(self.intervals, width, self.rows - 1, self.principal, self.shifts)
        return [runs(line, self.style_for) for line in cells]
