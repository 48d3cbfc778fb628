"""The captures pane as styled text: captures in progress with their progress, finished ones
with status and folder, failures with the reason in words. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from gputop.ui.gpu_text import Line, StyleFor
from gputop.ui.panes.pane import Pane

SHOWN = 4
LEVEL = {"running": "value", "ok": "good", "partial": "warn", "cancelled": "warn"}
NAMES = {
    "pyspy-flame": "flame graph",
    "pyspy-dump": "stack dump",
    "torch-trace": "torch trace",
    "memory-snapshot": "memory snapshot",
    "nsys": "nsys window",
}


@dataclass(frozen=True)
class CaptureView:
    """What the captures pane shows of one capture, as plain values: the same live and in replay."""

    key: int
    """Order of the request: newer captures have larger keys."""
    kind: str
    pid: int
    status: str = "running"
    done: float = 0.0
    total: float = 0.0
    unit: str = ""
    folder: str = ""
    reason: str = ""
    trigger: str = ""
    """What fired it (an armed capture: ``--arm``); "" for one a key took."""


def _progress(v: CaptureView) -> str:
    if v.status != "running":
        return v.status
    if v.total and v.unit == "s":
        return f"running {v.done:.0f}/{v.total:g} s, {max(0.0, v.total - v.done):.0f} s left"
    if v.total and v.unit == "steps":
        return f"running: {v.total:g} steps"
    return "running"


def capture_lines(views: Sequence[CaptureView], style: StyleFor, width: int) -> list[Text]:
    """Running captures first, then the newest finished ones; at most SHOWN lines."""
    order = sorted(views, key=lambda v: (v.status != "running", -v.key))[:SHOWN]
    lines: list[Text] = []
    for v in order:
        line = Line(style).add(" capture " if not lines else "         ", "name")
        if v.trigger:
            line.add(f"armed {v.trigger}: ", "warn")
        line.label(f"{NAMES.get(v.kind, v.kind)} of pid {v.pid}  ")
        line.add(_progress(v), LEVEL.get(v.status, "bad"))
        if v.reason:
            line.label(": ").add(
                v.reason, "warn" if v.status in ("partial", "cancelled") else "bad"
            )
        if v.folder:
            line.label("  ").add(v.folder)
        text = line.text
        text.truncate(max(10, width - 1), overflow="ellipsis")
        lines.append(text)
    return lines


class CapturesPane(Pane):
    """Captures in progress and finished (hidden until the first one is asked for)."""

    ORDER = 70  # fed by the captures as they move (``MonitorPanes.captures``), not the state

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
