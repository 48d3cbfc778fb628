"""The monitor's layout and its drawing, one idea because the two must agree: the header, the
panes (``ui/panes``, each found there, the target's only where their source is: its process
tree, its agents, its stacks), the GPU rows, the status line and the key bar; and a session's
state drawn into them, each pane when a reading it shows changed."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence

from textual.app import App
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget

from gputop.config import INTERVAL_MIN
from gputop.model import DeviceInfo
from gputop.session import SessionState
from gputop.ui.budget_cells import principal_slice
from gputop.ui.panes import Context, Pane, discovered, sources
from gputop.ui.panes.captures import CapturesPane, CaptureView
from gputop.ui.panes.chart import BudgetChart
from gputop.ui.room import Room, fit
from gputop.ui.widgets import GpuRow, HeaderLine, KeyBar, SimBanner, StatusLine

TARGET_PANES = sources()
"""Panes shown only with their source (a target's tree, its agents, its stacks)."""
FIT_LOST_S = 2 * INTERVAL_MIN
"""A share of the rows asked and not made for this long was dropped (its screen closed
before refreshing): asked again. Two of the fastest refreshes, far above a frame."""


class MonitorPanes:
    """The panes of ``app``'s main screen: ``shown``, which of ``TARGET_PANES`` it has;
    ``simulated``, the board's label when it is not a real GPU (the banner says so);
    ``spark_width``, the columns of a GPU row's histories."""

    def __init__(
        self,
        app: App,
        devices: Sequence[DeviceInfo],
        shown: frozenset[str],
        simulated: str | None,
        spark_width: int,
    ) -> None:
        self.app = app
        self.devices = tuple(devices)
        self.shown = shown
        self.simulated = simulated
        self.spark_width = spark_width
        self.room: Room | None = None
        """The rows last shared out (``ui/room.py``)."""
        self._fitting: tuple[object, float] | None = None
        """The screen a share of the rows was asked of, and when (monotonic s): Textual runs
        it after the refresh of the screen current when its message is read, and drops it when
        that screen closes first (a question opened and answered in between)."""
        self._composed: tuple[Pane, ...] = ()
        """The panes composed, top to bottom: drawn from each state without a DOM query."""
        self._drawn: tuple[SessionState, float, str | None] | None = None

    def widgets(self) -> Iterator[Widget]:
        """The screen, top to bottom (the app's ``compose``)."""
        yield HeaderLine(id="header")
        if self.simulated:
            yield SimBanner(f"SIMULATED {self.simulated} (not a real GPU)", id="sim-banner")
        self._composed = tuple(self._panes())
        yield Vertical(*self._composed, id="panes")
        rows = [GpuRow(d, spark_width=self.spark_width) for d in self.devices]
        yield VerticalScroll(*rows, id="gpus")
        yield StatusLine(id="status")
        yield KeyBar()

    def _panes(self) -> Iterator[Pane]:
        """The panes between the header and the GPUs, which give up their rows first: each the
        package holds, unless it needs a source this screen lacks."""
        for pane in discovered():
            if pane.SOURCE is None or pane.SOURCE in self.shown:
                yield pane.make(self.devices)

    def draw(
        self, state: SessionState, changed: str | None, interval: float, ended: str | None
    ) -> None:
        """The panes of the reading that ``changed`` (all when None), and the ranks and the
        verdict, which any reading may move. ``interval``: the refresh interval (a row's
        histories span its sparklines); ``ended``: how the job or the target ended (the step
        pane stops counting the open phase)."""
        app = self.app
        self._drawn = (state, interval, ended)
        if changed in (None, "gpu"):
            for row in app.query(GpuRow):
                seconds = (row.history_width + 1) * interval
                i = row.info.index
                row.show(state.gpus.get(i), state.gpu_history(i, seconds))
        context = Context(self.devices, ended, principal_slice(state.verdict))
        for pane in self._composed:
            if changed is None or pane.READS is None or changed in pane.READS:
                pane.draw(state, context)
        self.fit_soon()

    def fit_soon(self) -> None:
        """Shares the free rows out once the panes just drawn have been measured (after the
        next refresh); one pending at a time, asked again where it may have been dropped: on
        another screen, or unanswered for ``FIT_LOST_S``."""
        try:
            screen = self.app.screen
        except Exception:  # no screen: starting or leaving
            return
        now = time.monotonic()
        if self._fitting is not None:
            asked_of, asked_at = self._fitting
            if asked_of is screen and now - asked_at < FIT_LOST_S:
                return
        self._fitting = (screen, now)
        self.app.call_after_refresh(self.fit)

    def fit(self) -> None:
        """The screen's rows shared out (``ui/room.py``): the key bar, header and status line,
        a line per GPU, the panes as far as they fit, then the chart and the GPUs' histories;
        the GPU rows redrawn when theirs changed (a longer history)."""
        self._fitting = None
        app = self.app
        try:
            scroll = app.query_one("#gpus")
            panes = app.query_one("#panes")
        except Exception:  # not composed yet, or being torn down
            return
        screen = scroll.screen
        chart = next(iter(app.query(BudgetChart)), None)
        rows = list(app.query(GpuRow))
        fixed = sum(
            w.outer_size.height
            for w in screen.children
            if w.display and w is not scroll and w is not panes
        )
        asked = sum(w.outer_size.height for w in panes.children if w.display and w is not chart)
        has_chart = chart is not None and bool(chart.intervals or self._steps())
        room = fit(screen.size.height, fixed, asked, len(rows), has_chart)
        if room == self.room:
            return
        self.room = room
        with app.batch_update():
            panes.styles.max_height = room.panes_max
            if chart is not None:
                chart.set_rows(room.chart)
            longer = False
            for row, lines in zip(rows, room.history, strict=True):
                longer |= lines > row.history_rows
                row.set_history(lines, room.gpu_lines)
            if longer and self._drawn is not None:  # a history as wide as the row
                state, interval, ended = self._drawn
                self.draw(state, "gpu", interval, ended)

    def _steps(self) -> bool:
        """The job's agents report steps: a chart will have intervals to show."""
        drawn = self._drawn[0] if self._drawn is not None else None
        agents = drawn.agents if drawn is not None else None
        return agents is not None and any(a.steps for a in agents.agents)

    def select(self, index: int) -> None:
        """GPU ``index``'s row marked, and scrolled into view."""
        for row in self.app.query(GpuRow):
            row.select(row.info.index == index)
        with contextlib.suppress(Exception):
            self.app.query_one(f"#gpu-{index}", GpuRow).scroll_visible(animate=False)

    def captures(self, views: Iterable[CaptureView]) -> None:
        self.app.query_one(CapturesPane).show(list(views))

    def header(self, text: str, paused: bool) -> None:
        header = self.app.query_one(HeaderLine)
        header.update(text)
        header.set_class(paused, "-paused")

    def status(self, lines: Sequence[str]) -> None:
        """The status line, hidden when it has nothing to say."""
        status = self.app.query_one(StatusLine)
        status.update("\n".join(lines))
        if status.display != bool(lines):
            status.display = bool(lines)
            self.fit_soon()  # a row more or less for the others
