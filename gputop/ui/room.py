"""How the main screen shares its rows. The key bar, the header and the status line first, then
a line per GPU, then the panes (verdict, host, steps, ranks, stacks, captures) as much as they
ask, down to what is left: a tmux pane at 80x24 beside a multi-rank job keeps its way out and
its GPUs (``fit``). Then the rows the panes leave: the budget-over-time chart first, then each
GPU's history, then the chart again (without a chart, the GPUs' histories take more lines). At
``SMALL_ROWS`` or fewer nothing is added (every row there is already spoken for). Pure."""

from __future__ import annotations

from dataclasses import dataclass, replace

SMALL_ROWS = 24
"""A terminal this tall or shorter gets no chart and no history."""
CHART_FIRST = 6
"""Rows the chart takes first (its legend, four rows of shares, its time axis)."""
CHART_MIN = 4
"""Fewer rows than this draw no chart (a legend, two rows of shares and the axis)."""
HISTORY_MAX = 4
"""History lines per GPU beside a chart: SM activity, SM clock, power, throttle reasons
(without one, as many as the rows give: ``gpu_text.history_lines``)."""
GPU_ROW_LINES = 2
"""A GPU row's own lines (clocks, power, memory; activity, PCIe, reasons); history goes below.
Where the rows are short, the first alone."""
PANES_MIN = 3
"""Rows the panes keep however many GPUs there are (the verdict's head and its why): more GPUs
than rows scroll."""


@dataclass(frozen=True, slots=True)
class Room:
    """The rows given: the chart's (0: none) and each GPU's history lines, in row order."""

    chart: int
    history: tuple[int, ...]
    gpu_lines: int = GPU_ROW_LINES
    """Each GPU row's own lines: two, or its first alone where the rows are short."""
    panes_max: int | None = None
    """The most rows the panes may take (they show their first rows); None: what they ask."""


def fit(rows: int, fixed: int, panes: int, gpus: int, chart: bool) -> Room:
    """``rows``: the terminal's; ``fixed``: the header's, the banner's, the status line's and
    the key bar's, which are never given up; ``panes``: the rows the panes ask (the chart
    aside). The GPUs keep one line each before the panes take theirs."""
    left = rows - fixed
    if panes + GPU_ROW_LINES * gpus <= left:
        return share(rows, left - panes - GPU_ROW_LINES * gpus, gpus, chart)
    squeezed = Room(0, (0,) * gpus, gpu_lines=1)
    if panes + gpus <= left:
        return squeezed
    return replace(squeezed, panes_max=max(left - gpus, min(PANES_MIN, left)))


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
