"""The main screen's panes: header, simulated-board banner, host pane, GPU rows, status line."""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from gputop.diagnose import Interval, Verdict
from gputop.model import DeviceInfo, GpuSample
from gputop.model.budget import Budget
from gputop.model.host import HostSample
from gputop.model.ranks import main_agent, ranked
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample
from gputop.ui.budget_cells import chart_cells, runs
from gputop.ui.captures_text import CaptureView, capture_lines
from gputop.ui.gpu_text import gpu_lines, history_lines
from gputop.ui.host_text import host_lines
from gputop.ui.keybar import KeyItem, key_bar
from gputop.ui.room import GPU_ROW_LINES
from gputop.ui.stacks_text import stack_lines
from gputop.ui.steps_text import rank_lines, step_lines
from gputop.ui.verdict_text import verdict_lines

LEVELS = ("label", "name", "value", "good", "warn", "bad", "dim", "spark", "select", "key")
SELECTED = "▶"
"""Marks the selected GPU's row (j/k move it; enter opens it), in every theme, mono included."""


class LinePane(Widget):
    """A pane drawn line by line from styled text (Textual's Line API): exact columns, and a
    repaint only when the text or its styles changed, which keeps bytes over ssh down."""

    COMPONENT_CLASSES = {f"pane--{level}" for level in LEVELS}

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._rendered: tuple | None = None
        self._cache: dict[object, list[Text]] = {}
        self._strips: dict[int, Strip] = {}
        self._strips_key: tuple[int, int] | None = None
        self._styles: dict[str, Style] = {}
        self._style = Style()

    def build_lines(self, width: int) -> list[Text]:
        raise NotImplementedError

    def cache_key(self, width: int) -> object:
        """What the lines depend on besides the content: the width (a pane whose lines depend
        on more, the terminal's height, says so)."""
        return width

    def lines_for(self, width: int) -> list[Text]:
        """The lines at ``width``, built once per content and width: the layout's height
        query and the drawing read the same lines (building them twice was a tenth of the
        screen's cost)."""
        key = self.cache_key(width)
        lines = self._cache.get(key)
        if lines is None:
            if len(self._cache) > 4:  # a resize went through widths: keep only the latest
                self._cache.clear()
            lines = self._cache[key] = self.build_lines(width)
        return lines

    def style_for(self, level: str) -> Style:
        """A level's style, looked up once per theme (Textual resolves it from the stylesheet
        each time: a tenth of the screen's cost when every line of a GPU's history asked)."""
        style = self._styles.get(level)
        if style is None:
            style = self._styles[level] = self.get_component_rich_style(
                f"pane--{level}", partial=True
            )
        return style

    def lines(self) -> list[Text]:
        return self.lines_for(self.size.width or self.app.size.width)

    def changed(self) -> None:
        """The data changed: rebuild, and repaint if what is shown differs."""
        self._cache = {}
        self._strips = {}
        key = tuple((line.plain, tuple(line.spans)) for line in self.lines())
        if key != self._rendered:
            grew = self._rendered is None or len(key) != len(self._rendered)
            self._rendered = key
            self.refresh(layout=grew)

    def notify_style_update(self) -> None:
        """The theme changed: styles must be looked up again."""
        self._cache = {}
        self._strips = {}
        self._styles = {}
        super().notify_style_update()

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines_for(width))

    def text(self) -> str:
        return "\n".join(line.plain for line in self.lines())

    def render_line(self, y: int) -> Strip:
        """Line ``y`` as a strip, made once per content, width and style (a GPU row's history
        repaints every reading: its strips were half the screen's cost)."""
        lines = self.lines()
        width = self.size.width
        key = (width, len(lines))
        if self._strips_key != key or not self._strips:
            # the pane's own style (its background through its ancestors) once per drawing
            self._strips_key, self._strips, self._style = key, {}, self.rich_style
        strip = self._strips.get(y)
        if strip is None:
            if y >= len(lines):
                strip = Strip.blank(width, self._style)
            else:
                segments = list(lines[y].render(self.app.console))
                strip = Strip(segments).crop(0, width).extend_cell_length(width)
                strip = strip.apply_style(self._style)
            self._strips[y] = strip
        return strip


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


class HostPane(LinePane):
    """The attached process tree: CPU against effective CPUs, threads, workers, cgroup."""

    def __init__(self, gpus: int = 0) -> None:
        super().__init__(id="host")
        self.sample: HostSample | None = None
        self.gpus = gpus

    def show(self, sample: HostSample) -> None:
        self.sample = sample
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        if self.sample is None:
            return [Text(" host: waiting for the first reading", style=self.style_for("dim"))]
        return host_lines(self.sample, self.style_for, width, self.gpus)


class StepPane(LinePane):
    """The training step of the main rank, split into phases (from the in-process agent)."""

    def __init__(self) -> None:
        super().__init__(id="steps")
        self.agents: AgentsSample | None = None
        self.gpu_name: str | None = None
        self.ended: str | None = None

    def show(self, agents: AgentsSample, gpu_name: str | None, ended: str | None = None) -> None:
        """``ended``: how the job ended, once it has (the phase shown stops counting)."""
        self.agents, self.gpu_name, self.ended = agents, gpu_name, ended
        self.display = bool(agents.agents)
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        primary = main_agent(self.agents)
        if primary is None:
            return []
        return step_lines(primary, self.style_for, width, self.gpu_name, self.ended)


class BudgetChart(LinePane):
    """The budget over time (``ui/budget_cells.py``): shown when the screen has rows for it
    (``ui/room.py``), redrawn when an interval closed, the principal changed or the size did."""

    def __init__(self) -> None:
        super().__init__(id="budget-chart")
        self.intervals: tuple[Interval, ...] = ()
        self.principal: str | None = None
        self.rows = 0
        self.display = False

    def show(self, intervals: tuple[Interval, ...], principal: str | None) -> None:
        if intervals is self.intervals and principal == self.principal:
            return
        self.intervals, self.principal = intervals, principal
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
        cells = chart_cells(self.intervals, width, self.rows - 1, self.principal)
        return [runs(line, self.style_for) for line in cells]


class RanksPane(LinePane):
    """One row per rank: step time, work time and sync wait (shown with two or more ranks)."""

    def __init__(self) -> None:
        super().__init__(id="ranks")
        self.agents: AgentsSample | None = None
        self.budget: Budget | None = None
        self.principal: str | None = None

    def show(
        self, agents: AgentsSample, budget: Budget | None = None, principal: str | None = None
    ) -> None:
        """``budget``: the verdict's, whose ranks say where each rank's time goes;
        ``principal``: its principal's slice (capitals in the bars). The same reading and
        budget again (a reading of another source came) draws nothing."""
        if agents is self.agents and budget is self.budget and principal == self.principal:
            return
        self.agents, self.budget, self.principal = agents, budget, principal
        self.display = len(ranked(agents)) > 1
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        agents = ranked(self.agents)
        return rank_lines(agents, self.style_for, width, self.budget, self.principal)


class VerdictPane(LinePane):
    """The principal bound, its evidence, the cheapest lever, and how long it has held."""

    def __init__(self) -> None:
        super().__init__(id="verdict")
        self.verdict: Verdict | None = None
        self.now = 0.0

    def show(self, verdict: Verdict | None, now: float) -> None:
        self.verdict, self.now = verdict, now
        self.changed()

    def cache_key(self, width: int) -> object:
        return width, self.compact

    @property
    def compact(self) -> bool:
        return self.app.size.height < 32

    def build_lines(self, width: int) -> list[Text]:
        return verdict_lines(self.verdict, self.now, self.style_for, width, self.compact)


class StacksPane(LinePane):
    """Where the Python threads are: phase, deciding frame, shares over the last minute."""

    def __init__(self) -> None:
        super().__init__(id="stacks")
        self.window: Sequence[StacksSample] = ()

    def show(self, window: Sequence[StacksSample]) -> None:
        self.window = window
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        return stack_lines(self.window, self.style_for, width)


class CapturesPane(LinePane):
    """Captures in progress and finished (hidden until the first one is asked for)."""

    def __init__(self) -> None:
        super().__init__(id="captures")
        self.views: Sequence[CaptureView] = ()
        self.display = False

    def show(self, views: Sequence[CaptureView]) -> None:
        self.views = views
        self.display = bool(views)
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        return capture_lines(self.views, self.style_for, width)


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
