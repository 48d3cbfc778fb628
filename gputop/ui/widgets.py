"""The main screen's panes: header, simulated-board banner, GPU rows, status line."""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from gputop.model import DeviceInfo, GpuSample
from gputop.ui.gpu_text import gpu_lines

LEVELS = ("label", "name", "value", "good", "warn", "bad", "dim", "spark")


class GpuRow(Widget):
    """One GPU in two lines: clocks, power, memory, temperature; activity, PCIe, reasons."""

    COMPONENT_CLASSES = {f"gpu--{level}" for level in LEVELS}

    def __init__(self, info: DeviceInfo, spark_width: int = 40) -> None:
        super().__init__(id=f"gpu-{info.index}", classes="gpu-row")
        self.info = info
        self.sample: GpuSample | None = None
        self.history: Sequence[GpuSample] = ()
        self.spark_width = spark_width
        self._rendered: tuple | None = None
        self._cache: tuple[int, tuple[Text, Text]] | None = None

    def show(self, sample: GpuSample | None, history: Sequence[GpuSample]) -> None:
        """New data; repaints only when the visible text changed (saves terminal bytes)."""
        self.sample, self.history = sample, history
        self._cache = None
        lines = self._lines()
        key = tuple((line.plain, tuple(line.spans)) for line in lines)
        if key != self._rendered:
            self._rendered = key
            self.refresh()

    def _style(self, level: str) -> Style:
        return self.get_component_rich_style(f"gpu--{level}", partial=True)

    def _lines(self) -> tuple[Text, Text]:
        width = self.size.width or self.app.size.width
        if self._cache is None or self._cache[0] != width:
            lines = gpu_lines(
                self.info, self.sample, self._style, width, self.history, self.spark_width
            )
            self._cache = (width, lines)
        return self._cache[1]

    def notify_style_update(self) -> None:
        """The theme changed: styles must be looked up again."""
        self._cache = None
        super().notify_style_update()

    def _text(self) -> Text:
        return Text("\n").join(self._lines())

    def render_line(self, y: int) -> Strip:
        """Line API: exact columns (no re-wrapping), and only this row's cells are redrawn."""
        lines = self._lines()
        if y >= len(lines):
            return Strip.blank(self.size.width, self.rich_style)
        width = self.size.width
        segments = list(lines[y].render(self.app.console))
        strip = Strip(segments).crop(0, width).extend_cell_length(width)
        return strip.apply_style(self.rich_style)


class HeaderLine(Static):
    """Names the target (or says there is none), the board, and the refresh state."""


class SimBanner(Static):
    """Shown whenever the board is simulated: nothing on screen may pass for a real GPU."""


class StatusLine(Static):
    """Persistent problems: a stalled driver, a bad config or theme file."""
