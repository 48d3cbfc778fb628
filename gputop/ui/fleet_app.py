"""`gputop fleet`'s screen: one row per node of a training job, the slow node first, refreshed
from Prometheus in a worker thread (a slow server never freezes the keys); a failed reading is
said on the status line and the last rows stay. The slow node's row is in the theme's error
colour, a node with stuck ranks or throttled GPUs in its warning colour (Textual draws them in
black and white under NO_COLOR). Its stylesheet, theme and key bar are the monitor's
(``ui/themed_app.py``, ``ui/keybar.py``): at 80 columns Textual's footer was cut."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from gputop.config import Config
from gputop.errors import GputopError
from gputop.fleet.nodes import NodeRow
from gputop.ui.keybar import KeyItem, key_name
from gputop.ui.themed_app import ThemedApp
from gputop.ui.widgets import KeyBar, StatusLine

COLUMNS = ("", "node", "work/step", "vs job", "verdict", "biggest loss", "stuck ranks",
           "throttled GPUs", "slowest rank")  # fmt: skip
"""Alarms before detail: a narrow terminal cuts the last columns first."""


def cells(r: NodeRow) -> tuple[str, ...]:
    """One node's row as the table shows it."""
    return (
        "SLOW" if r.slow else "",
        r.instance,
        f"{1e3 * r.work_s:.0f} ms" if r.work_s is not None else "n/a",
        f"{r.ratio:.2f}x" if r.ratio is not None else "n/a",
        r.verdict or "-",
        f"{r.biggest_loss[0]} {r.biggest_loss[1]:.0%}" if r.biggest_loss else "-",
        ",".join(r.stuck_ranks) or "-",
        ",".join(r.throttled_gpus) or "-",
        f"{r.slowest_rank[0]} ({1e3 * r.slowest_rank[1]:.0f} ms)" if r.slowest_rank else "-",
    )


def level(r: NodeRow) -> Literal["error", "warning"] | None:
    """How loudly a node's row is drawn: the slow node as an error, a node with stuck ranks or
    throttled GPUs as a warning, any other plainly."""
    if r.slow:
        return "error"
    if r.stuck_ranks or r.throttled_gpus:
        return "warning"
    return None


class FleetApp(ThemedApp[None]):
    """The nodes of one job (or every job), read by ``read`` every ``interval`` seconds;
    ``config``: the colours and theme (the config file's, as the monitor's)."""

    TITLE = "gputop fleet"
    BINDINGS = [Binding("q", "quit", "Quit"), Binding("r", "refresh", "Refresh now")]

    def __init__(
        self,
        read: Callable[[], Sequence[NodeRow]],
        *,
        where: str,
        interval: float,
        config: Config | None = None,
    ) -> None:
        config = config or Config()
        super().__init__(config)
        self.read = read
        self.where = where
        self.interval = interval
        self.problems = [*config.problems, *self.theme_problems]
        """The config's and the theme files' problems, on the status line."""

    def compose(self) -> ComposeResult:
        yield Static(f"{self.where}: reading...", id="fleet-status")
        yield DataTable(id="fleet-nodes", cursor_type="row", zebra_stripes=True)
        yield StatusLine("\n".join(self.problems), id="status")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(StatusLine).display = bool(self.problems)
        keys = [b for b in self.BINDINGS if isinstance(b, Binding)]
        self.query_one(KeyBar).show([KeyItem(key_name(b.key), b.description) for b in keys])
        self.query_one(DataTable).add_columns(*COLUMNS)
        self.action_refresh()
        self.set_interval(self.interval, self.action_refresh)

    def action_refresh(self) -> None:
        self.run_worker(self._read, thread=True, exclusive=True, group="fleet")

    def _read(self) -> None:
        try:
            rows = list(self.read())
        except GputopError as e:
            self.call_from_thread(self.show_problem, str(e))
            return
        self.call_from_thread(self.show, rows)

    def show(self, rows: Sequence[NodeRow]) -> None:
        """The nodes, slow first; the status line says how many and which is slow."""
        table = self.query_one(DataTable)
        table.clear()
        for r in rows:
            loud = level(r)
            colour = getattr(self.current_theme, loud) if loud else None
            shown = [Text(c, style=f"bold {colour}") if colour else c for c in cells(r)]
            table.add_row(*shown, key=r.instance)
        slow = [r.instance for r in rows if r.slow]
        said = f"slow: {', '.join(slow)}" if slow else "no slow node"
        status = f"{self.where}: {len(rows)} nodes, {said}" if rows else f"{self.where}: no node"
        self.query_one("#fleet-status", Static).update(status)

    def show_problem(self, text: str) -> None:
        """A failed reading: said, and the last rows kept."""
        self.query_one("#fleet-status", Static).update(f"{self.where}: {text}")
