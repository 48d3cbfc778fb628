"""Did it help: this run against the job's last one, and the latest shift of step time inside
the run, as every output says them (``render/compare.py``). Hidden while there is neither."""

from __future__ import annotations

from rich.text import Text

from gputop.render.compare import (
    comparison_doc,
    comparison_lines,
    grouped,
    shift_docs,
    shift_line,
)
from gputop.session import SessionState
from gputop.ui.gpu_text import Line
from gputop.ui.line_fit import ellipsize
from gputop.ui.panes.pane import Context, Pane

LINES_MOST = 4
"""The comparison's head, two slices or the lever, and the latest shift."""


class ChangePane(Pane):
    """Before and after: the job's last run against this one, and shifts within this one."""

    ORDER = 12
    SOURCE = "agents"
    READS = None  # the comparison is remade at each evaluation

    def __init__(self) -> None:
        super().__init__(id="change")
        self.texts: tuple[str, ...] = ()
        self.display = False

    def draw(self, state: SessionState, context: Context) -> None:
        compared = comparison_lines(comparison_doc(state.comparison)) if state.comparison else []
        said = grouped(shift_docs(state.shifts, state.shift_change)) if state.shifts else []
        shift = shift_line(said[-1]) if said else None
        shown = _fitting(compared, shift)
        if shown != self.texts:
            self.texts = shown
            self.display = bool(shown)
            self.changed()

    def cache_key(self, width: int) -> object:
        return width, self.texts

    def build_lines(self, width: int) -> list[Text]:
        out = []
        for i, text in enumerate(self.texts):
            line = Line(self.style_for).add(" change " if i == 0 else "        ", "name")
            out.append(ellipsize(line.label(text.strip()).text, width))
        return out


def _detail_rank(line: str) -> int:
    """The lever checked first, then what changed, then the slices in their order."""
    text = line.strip()
    return 0 if "last run's lever" in text else 1 if text.startswith(("changed:", "same ")) else 2


def _fitting(compared: list[str], shift: str | None) -> tuple[str, ...]:
    """At most LINES_MOST: the comparison's head and the shift first, then what room is left
    of the comparison's details (``_detail_rank``)."""
    tail = (shift,) if shift else ()
    if not compared:
        return tail
    details = sorted(compared[1:], key=_detail_rank)
    return (compared[0], *details[: LINES_MOST - 1 - len(tail)], *tail)
