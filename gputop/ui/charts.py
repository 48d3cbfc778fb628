"""Charts with axes for the detail screen, drawn by plotext (6.x figure API) as ANSI text.

plotext keeps one global figure, so charts are only ever built on the UI thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotext
from rich.text import Text

Y_MAX = 1e6
"""A scale above anything a board reports (W, %, MHz)."""


def line_chart(
    series: Sequence[tuple[str, Sequence[float | None]]],
    width: int,
    height: int,
    y_max: float,
    title: str,
    colorless: bool = False,
    seconds: Sequence[float] | None = None,
) -> Text:
    """Lines on a fixed 0..y_max scale, values held to it (a replayed file may hold any number);
    x is seconds before now when ``seconds`` is given."""
    y_max = min(y_max, Y_MAX) if math.isfinite(y_max) and y_max > 0 else 100.0  # from a file
    fig = plotext.figure
    fig.clear()
    fig.plot_size(max(20, width), max(6, height))
    fig.title(title)
    fig.theme("colorless" if colorless else "dark")
    drawn = False
    for label, values in series:
        # held to the scale: plotext 6.1 aborts the process (std::bad_alloc) on some far-off
        # values, and a replayed file may hold any number
        points = [
            (x, min(max(v, 0.0), y_max))
            for x, v in zip(seconds or range(len(values)), values, strict=False)
            if v is not None and math.isfinite(v)
        ]
        if len(points) < 2:
            continue
        xs, ys = zip(*points, strict=True)
        signal = fig.signal(list(xs), list(ys))
        signal.lines()
        signal.label(label)
        fig.draw(signal)
        drawn = True
    fig.ruler("y").lim(0, y_max)
    if not drawn:
        return Text(f"{title}: not enough history yet", style="dim")
    return Text.from_ansi(fig.build().string(colorless=colorless))
