"""The main screen's panes: header, simulated-board banner, host pane, GPU rows, status line."""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from gputop.diagnose.findings import Verdict
from gputop.model import DeviceInfo, GpuSample
from gputop.model.budget import Budget
from gputop.model.host import HostSample
from gputop.model.ranks import main_agent, ranked
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample
from gputop.ui.captures_text import CaptureView, capture_lines
from gputop.ui.gpu_text import gpu_lines
from gputop.ui.host_text import host_lines
from gputop.ui.keybar import KeyItem, key_bar
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
        self._cache: tuple[int, list[Text]] | None = None

    def build_lines(self, width: int) -> list[Text]:
        raise NotImplementedError

    def style_for(self, level: str) -> Style:
        return self.get_component_rich_style(f"pane--{level}", partial=True)

    def lines(self) -> list[Text]:
        width = self.size.width or self.app.size.width
        if self._cache is None or self._cache[0] != width:
            self._cache = (width, self.build_lines(width))
        return self._cache[1]

    def changed(self) -> None:
        """The data changed: rebuild, and repaint if what is shown differs."""
        self._cache = None
        key = tuple((line.plain, tuple(line.spans)) for line in self.lines())
        if key != self._rendered:
            grew = self._rendered is None or len(key) != len(self._rendered)
            self._rendered = key
            self.refresh(layout=grew)

    def notify_style_update(self) -> None:
        """The theme changed: styles must be looked up again."""
        self._cache = None
        super().notify_style_update()

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.build_lines(width))

    def text(self) -> str:
        return "\n".join(line.plain for line in self.lines())

    def render_line(self, y: int) -> Strip:
        lines = self.lines()
        width = self.size.width
        if y >= len(lines):
            return Strip.blank(width, self.rich_style)
        segments = list(lines[y].render(self.app.console))
        return Strip(segments).crop(0, width).extend_cell_length(width).apply_style(self.rich_style)


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

    def show(self, sample: GpuSample | None, history: Sequence[GpuSample]) -> None:
        self.sample, self.history = sample, history
        self.changed()

    def select(self, selected: bool) -> None:
        if selected != self.selected:
            self.selected = selected
            self.set_class(selected, "-selected")
            self.changed()

    def build_lines(self, width: int) -> list[Text]:
        one, two = gpu_lines(
            self.info, self.sample, self.style_for, width - 1, self.history, self.spark_width
        )
        mark = Text(SELECTED, style=self.style_for("select")) if self.selected else Text(" ")
        return [mark + one, Text(" ") + two]


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


class RanksPane(LinePane):
    """One row per rank: step time, work time and sync wait (shown with two or more ranks)."""

    def __init__(self) -> None:
        super().__init__(id="ranks")
        self.agents: AgentsSample | None = None
        self.budget: Budget | None = None

    def show(self, agents: AgentsSample, budget: Budget | None = None) -> None:
        """``budget``: the verdict's, whose ranks say where each rank's time goes. The same
        reading and budget again (a reading of another source came) draws nothing."""
        if agents is self.agents and budget is self.budget:
            return
        self.agents, self.budget = agents, budget
        self.display = len(ranked(agents)) > 1
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        return rank_lines(ranked(self.agents), self.style_for, width, self.budget)


class VerdictPane(LinePane):
    """The principal bound, its evidence, the cheapest lever, and how long it has held."""

    def __init__(self) -> None:
        super().__init__(id="verdict")
        self.verdict: Verdict | None = None
        self.now = 0.0

    def show(self, verdict: Verdict | None, now: float) -> None:
        self.verdict, self.now = verdict, now
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        compact = self.app.size.height < 32
        return verdict_lines(self.verdict, self.now, self.style_for, width, compact)


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
