"""The main screen's chrome: the header, the simulated-board banner, the GPU rows, the status line
and the key bar (the panes between them are `ui/panes`)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from gputop.model import DeviceInfo, GpuSample
from gputop.ui.gpu_text import gpu_lines, history_lines
from gputop.ui.keybar import KeyItem, key_bar
from gputop.ui.line_pane import LinePane
from gputop.ui.room import GPU_ROW_LINES

SELECTED = "▶"
"""Marks the selected GPU's row (j/k move it; enter opens it), in every theme, mono included."""


class GpuRow(LinePane):
    """One GPU in two lines: clocks, power, memory, temperature; activity, PCIe, reasons. The
    first column marks the selected row."""

    def __init__(self, info: DeviceInfo, spark_width: int = 40) -> None:
        super().__init__(id=f"gpu-{info.index}", classes="gpu-row")
        self.info = info
        self.sample: GpuSample | None = None
        self.history: Sequence[GpuSample] = ()
        self.spark_width = spark_width
        self.selected = False
        self.history_rows = 0
        """History lines below the row's two (``ui/room.py``); with them, no sparklines."""
        self.own_rows = GPU_ROW_LINES
        """The row's own lines shown: two, or the first alone (``ui/room.py``)."""

    def show(self, sample: GpuSample | None, history: Sequence[GpuSample]) -> None:
        self.sample, self.history = sample, history
        self.changed()

    def select(self, selected: bool) -> None:
        if selected != self.selected:
            self.selected = selected
            self.set_class(selected, "-selected")
            self.changed()

    def set_history(self, rows: int, own: int = GPU_ROW_LINES) -> None:
        """Gives the row ``rows`` lines of history (0: its own lines alone) below ``own`` of its
        own lines (two, or the first alone where the screen is short: ``ui/room.py``)."""
        if (rows, own) != (self.history_rows, self.own_rows):
            self.history_rows, self.own_rows = rows, own
            self.styles.height = own + rows
            self.changed()

    @property
    def history_width(self) -> int:
        """The readings the row draws: its sparklines', or its history lines' columns."""
        return max(self.spark_width, self.size.width) if self.history_rows else self.spark_width

    def build_lines(self, width: int) -> list[Text]:
        sparks = () if self.history_rows else self.history
        one, two = gpu_lines(
            self.info, self.sample, self.style_for, width - 1, sparks, self.spark_width
        )
        mark = Text(SELECTED, style=self.style_for("select")) if self.selected else Text(" ")
        lines = [mark + one, Text(" ") + two]
        if self.history_rows and self.sample is not None and not self.sample.lost:
            more = history_lines(
                self.info, self.history, self.style_for, width - 1, self.history_rows
            )
            lines += [Text(" ") + line for line in more]
        return lines


class KeyBar(LinePane):
    """The keys, laid out for the width (``ui/keybar.py``): the important ones and, when not
    all fit, the help key's "more keys"."""

    def __init__(self) -> None:
        super().__init__(id="keys")
        self.items: Sequence[KeyItem] = ()

    def show(self, items: Sequence[KeyItem]) -> None:
        self.items = items
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        return [key_bar(self.items, width, self.style_for)]


class HeaderLine(Static):
    """Names the target (or says there is none), the board, and the refresh state."""


class SimBanner(Static):
    """Shown whenever the board is simulated: nothing on screen may pass for a real GPU."""


class StatusLine(Static):
    """Persistent problems: a stalled driver, a bad config or theme file. Plain text: the lines
    quote what files hold, and "[/x]" read as markup would stop the screen."""

    def __init__(self, content: str = "", *, id: str | None = None) -> None:
        super().__init__(content, markup=False, id=id)
