"""The budget over time as cells: one column per closed interval (``diagnose/budget_bins.py``),
newest at the right edge, each slice stacked bottom up in ``SLICES`` order on a 0-100% scale.

A window's share says only how much a periodic cost takes; columns over time say whether it
is steady, growing, or one spike (a checkpoint every M steps is a column every M/steps-per-
interval). Every slice has its own mark, compute a solid block and each loss a letter, and the
principal's slice is drawn in capitals as well as the bad colour, so NO_COLOR and mono read it.
Cells are (char, level) pairs; ``runs`` joins a line's cells into one span per run of one
level (a span per cell made the chart the screen's costliest pane). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text

from gputop.diagnose import BY_NAME, Interval, Verdict
from gputop.ui.gpu_text import StyleFor, append_runs
from gputop.vocab import budget as b

MARKS: Mapping[str, str] = {
    b.COMPUTE: "█",
    b.DATA: "d",
    b.H2D: "h",
    b.COMMS: "c",
    b.STRAGGLER: "s",
    b.EVAL: "e",
    b.CHECKPOINT: "k",
    b.LOG: "l",
    b.GC: "g",
    b.LOOP: "p",
    b.STALL: "x",
}
"""Each slice's mark: a letter of its name (k for checkpoint, p for the loop's Python: c and l
are taken); the principal's letter in capitals."""
NO_BUDGET = "·"
"""An interval in which no step finished (a stall, a long pass not ended yet)."""
SCALE_W = 5
"""The share scale's column: "100%┤"."""
LABEL_GAP = 2
"""Columns kept free between two time marks."""
SHIFT = "▲"
"""Under the column of an interval in which a rank's step time shifted (``step_shift``)."""

Cell = tuple[str, str]
"""(character, level): a level is a pane style's name (``widgets.LEVELS``)."""


def principal_slice(verdict: Verdict | None) -> str | None:
    """The loss slice the verdict's principal names (the largest of its bound's slices in the
    verdict's budget: side work names four), or None (compute-bound, no verdict)."""
    if verdict is None or verdict.principal is None:
        return None
    entry = BY_NAME.get(verdict.principal.bound)
    names = [s for s in (entry.slices if entry is not None else ()) if s in b.LOSSES]
    if not names:
        return None
    if verdict.budget is None or len(names) == 1:
        return names[0]
    budget = verdict.budget
    return max(names, key=budget.share)


def mark(name: str, principal: str | None) -> Cell:
    """A slice's cell: compute a good block, a loss its letter, the principal's in capitals."""
    if name == b.COMPUTE:
        return MARKS[name], "good"
    if name == principal:
        return MARKS[name].upper(), "bad"
    return MARKS[name], "value"


def stack(shares: Mapping[str, float], height: int, principal: str | None) -> list[Cell]:
    """``height`` cells, bottom first, each slice's share of them in ``SLICES`` order. Bounds
    are rounded from the running total, so the cells always add up to ``height`` and a slice's
    count is its share within one cell."""
    out: list[Cell] = []
    total = 0.0
    for name in b.SLICES:
        share = shares.get(name, 0.0)
        if share <= 0:
            continue
        lo = round(total * height)
        total += share
        hi = min(height, round(total * height))
        out += [mark(name, principal)] * max(0, hi - lo)
    return out + [(" ", "dim")] * (height - len(out))


def column(interval: Interval, height: int, principal: str | None) -> list[Cell]:
    """One interval's column, bottom first; one without a budget is a dim mark at the bottom."""
    if interval.budget is None:
        return [(NO_BUDGET, "dim")] + [(" ", "dim")] * (height - 1)
    shares = {s.name: s.share for s in interval.budget.slices}
    return stack(shares, height, principal)


def chart_cells(
    intervals: Sequence[Interval],
    width: int,
    height: int,
    principal: str | None,
    shifts: Sequence[float] = (),
) -> list[list[Cell]]:
    """The chart in ``height`` lines of ``width`` cells: a legend line, the plot with its share
    scale, and the time axis, with SHIFT under the interval of each of ``shifts`` (session
    times a shift of step time was called). Only the last intervals that fit are read."""
    plot_h = height - 2
    plot_w = width - SCALE_W
    if plot_h < 1 or plot_w < 8:
        return []
    shown = list(intervals[-plot_w:])
    columns = [column(i, plot_h, principal) for i in shown]
    pad = plot_w - len(columns)
    lines: list[list[Cell]] = [legend(shown, width, principal)]
    for row in range(plot_h - 1, -1, -1):  # top row first
        line = _scale(row, plot_h)
        line += [(" ", "dim")] * pad
        line += [c[row] for c in columns]
        lines.append(line)
    seconds = shown[-1].seconds if shown else 0.0
    axis = time_axis(plot_w, seconds, len(columns))
    for i, interval in enumerate(shown):
        if any(interval.start <= t < interval.start + interval.seconds for t in shifts):
            axis[SCALE_W + pad + i] = (SHIFT, "warn")
    if shifts and any(c == (SHIFT, "warn") for c in axis) and len(lines[0]) + 14 <= width:
        lines[0] += [(" ", "dim"), (SHIFT, "warn")] + [(ch, "label") for ch in " step shift"]
    lines.append(axis)
    return lines


def _scale(row: int, plot_h: int) -> list[Cell]:
    """The share scale's cells for plot row ``row`` (0: the bottom)."""
    if row == plot_h - 1:
        label = "100%"
    elif row == 0:
        label = "  0%"
    elif plot_h >= 5 and row == plot_h // 2:
        label = f"{round(100 * (row + 0.5) / plot_h):>3}%"
    else:
        label = "    "
    return [(ch, "label") for ch in label] + [("┤", "dim")]


def time_axis(plot_w: int, seconds: float, columns: int) -> list[Cell]:
    """The time marks under the plot's ``columns`` intervals ("-1m" under the interval that
    ended a minute before the newest), as many whole minutes apart as keep them from
    touching."""
    cells: list[Cell] = [(" ", "dim")] * (SCALE_W + plot_w)
    if seconds <= 0:
        return cells
    per_minute = 60.0 / seconds
    every = 1
    while every * per_minute < len(f"-{every}m") + LABEL_GAP:
        every += 1
    minute = every
    while True:
        text = f"-{minute}m"
        right = SCALE_W + plot_w - round(minute * per_minute)  # the column the mark ends at
        left = right - len(text) + 1
        if left < SCALE_W + plot_w - columns:
            break
        for i, ch in enumerate(text):
            cells[left + i] = (ch, "label")
        minute += every
    return cells


def legend(shown: Sequence[Interval], width: int, principal: str | None) -> list[Cell]:
    """Names the marks of the slices the columns hold: the principal's first, then the others
    in ``SLICES`` order while they fit."""
    present = set()
    for i in shown:
        if i.budget is not None:
            present |= {s.name for s in i.budget.slices if s.share > 0}
    seconds = shown[-1].seconds if shown else 0.0
    head = f"budget per {seconds:g} s " if seconds else "budget over time: no interval closed yet "
    cells: list[Cell] = [(ch, "label") for ch in head]
    items = [principal] if principal else []
    items += [n for n in b.SLICES if n in present and n != principal]
    for name in items:
        char, level = mark(name, principal)
        item = [(" ", "dim"), (char, level)] + [(ch, "label") for ch in f" {name}"]
        if len(cells) + len(item) > width:
            break
        cells += item
    if any(i.budget is None for i in shown) and len(cells) + 11 <= width:
        cells += [(" ", "dim"), (NO_BUDGET, "dim")] + [(ch, "label") for ch in " no steps"]
    return cells


def runs(cells: Sequence[Cell], style: StyleFor) -> Text:
    """One line of cells as Text with one span per run of one level."""
    text = Text(no_wrap=True, overflow="crop")
    append_runs(text, cells, style)
    return text
