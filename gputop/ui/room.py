"""How the main screen shares the rows its panes leave: the budget-over-time chart first, then
each GPU's history, then the chart again (without a chart, the GPUs' histories take more
lines). At ``SMALL_ROWS`` or fewer nothing is added (an
80x24 screen stays as it was: every row there is already spoken for). Pure."""

from __future__ import annotations

from dataclasses import dataclass

SMALL_ROWS = 24
"""A terminal this tall or shorter gets no chart and no history."""
CHART_FIRST = 6
"""Rows the chart takes first (its legend, four rows of shares, its time axis)."""
CHART_MIN = 4
"""Fewer rows than this draw no chart (a legend, two rows of shares and the axis)."""
HISTORY_MAX = 4
"""History lines per GPU beside a chart: SM activity, SM clock, power, throttle reasons
(without one, as many as the rows give: ``gpu_text.history_lines``)."""


@dataclass(frozen=True, slots=True)
class Room:
    """The rows given: the chart's (0: none) and each GPU's history lines, in row order."""

    chart: int
    history: tuple[int, ...]


def share(rows: int, free: int, gpus: int, chart: bool) -> Room:
    """``rows``: the terminal's; ``free``: what the panes leave once each GPU has its two
    lines; ``chart``: the job's agents report steps, so there is a budget over time."""
    if rows <= SMALL_ROWS or free <= 0:
        return Room(0, (0,) * gpus)
    first = min(free, CHART_FIRST) if chart else 0
    if first < CHART_MIN:
        first = 0
    left = free - first
    each, extra = divmod(left, gpus) if gpus else (0, 0)
    # without a chart the GPUs take every row: memory, temperature, DRAM, then a taller graph
    most = HISTORY_MAX if first else left
    history = tuple(min(most, each + (i < extra)) for i in range(gpus))
    rest = left - sum(history)
    return Room(first + rest if first else 0, history)
