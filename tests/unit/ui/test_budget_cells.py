"""The budget over time as cells: a periodic cost is a pattern of columns, the principal's slice
is in capitals, and the letters alone say which slice is which (NO_COLOR, mono)."""

from __future__ import annotations

from builders import job_readings
from rich.style import Style

from gputop.diagnose.budget_bins import BudgetBins, Interval
from gputop.ui.budget_cells import MARKS, NO_BUDGET, SCALE_W, chart_cells, runs, stack
from gputop.vocab import budget as b


def intervals(every_save: int, seconds: int, ranks: int = 1, slow_rank: int | None = None):
    bins = BudgetBins(seconds=5.0)
    for r in job_readings(every_save, seconds, ranks, slow_rank):
        bins.add(r)
    return bins.closed


def plot(lines):
    """The plot's rows (legend and time axis off), top first, without the share scale."""
    return ["".join(c for c, _ in line[SCALE_W:]) for line in lines[1:-1]]


def columns(lines):
    rows = plot(lines)
    return ["".join(row[i] for row in rows) for i in range(len(rows[0]))]


def test_a_checkpoint_every_ten_seconds_is_every_other_column():
    shown = intervals(every_save=10, seconds=61)
    lines = chart_cells(shown, width=SCALE_W + 30, height=22, principal=None)
    cols = [c for c in columns(lines) if c.strip()]
    assert len(cols) == len(shown) == 12
    saved = ["k" in c for c in cols]
    assert saved in ([False, True] * 6, [True, False] * 6), cols


def test_every_column_adds_up_to_the_plot_height_in_slice_order():
    shown = intervals(every_save=10, seconds=31)
    lines = chart_cells(shown, width=SCALE_W + 20, height=12, principal=None)
    order = "".join(MARKS[s] for s in b.SLICES)
    for col in (c for c in columns(lines) if c.strip()):
        bottom_up = col[::-1]
        assert " " not in bottom_up  # the shares fill the column
        positions = [order.index(ch) for ch in bottom_up]
        assert positions == sorted(positions), col  # compute at the bottom, then in SLICES order


def test_the_principal_slice_is_in_capitals_and_bad():
    shown = intervals(every_save=1000, seconds=21, ranks=3, slow_rank=2)
    lines = chart_cells(shown, width=SCALE_W + 40, height=12, principal=b.STRAGGLER)
    text = "\n".join(plot(lines))
    assert "S" in text and "s" not in text
    assert {lvl for line in lines for ch, lvl in line if ch == "S"} == {"bad"}
    legend = "".join(c for c, _ in lines[0])
    assert legend.index("S straggler") < legend.index("█ compute") < legend.index("d data")


def test_the_marks_alone_tell_the_slices_apart():
    """Under NO_COLOR and mono only the characters are left: each slice's is its own, and the
    principal's capital is none of the others'."""
    marks = list(MARKS.values())
    assert len(set(marks)) == len(b.SLICES) == len(marks)
    capitals = {m.upper() for m in marks if m.isalpha()}
    assert not capitals & set(marks)


def test_an_interval_without_steps_is_a_dim_mark():
    shown = intervals(every_save=1000, seconds=11)
    gap = Interval(shown[-1].start + 5.0, 5.0, None)
    lines = chart_cells((*shown, gap), width=SCALE_W + 50, height=8, principal=None)
    assert lines[-2][-1] == (NO_BUDGET, "dim")  # the bottom row's newest column
    assert all(line[-1][0] == " " for line in lines[1:-2])
    assert "no steps" in "".join(c for c, _ in lines[0])


def test_the_time_axis_marks_whole_minutes_back_from_the_newest_interval():
    shown = intervals(every_save=1000, seconds=151)  # 30 intervals of 5 s
    lines = chart_cells(shown, width=SCALE_W + 40, height=8, principal=None)
    axis = "".join(c for c, _ in lines[-1])
    end = SCALE_W + 40 - 12  # a minute is 12 columns before the right edge
    assert axis[end - 2 : end + 1] == "-1m", axis
    assert axis[end - 12 - 2 : end - 12 + 1] == "-2m", axis
    assert "-3m" not in axis  # no mark left of the oldest column


def test_too_little_room_draws_nothing():
    shown = intervals(every_save=1000, seconds=11)
    assert chart_cells(shown, width=40, height=2, principal=None) == []
    assert chart_cells(shown, width=SCALE_W + 4, height=8, principal=None) == []


def test_a_bar_is_its_shares_of_the_width():
    cells = stack({b.COMPUTE: 0.5, b.DATA: 0.25, b.STRAGGLER: 0.25}, 20, b.STRAGGLER)
    assert "".join(c for c, _ in cells) == "█" * 10 + "d" * 5 + "S" * 5


def test_runs_are_one_span_per_level():
    styles = {"good": Style(color="green"), "value": Style(italic=True), "bad": Style(bold=True)}
    text = runs(stack({b.COMPUTE: 0.5, b.DATA: 0.25, b.STRAGGLER: 0.25}, 20, b.STRAGGLER),
                styles.__getitem__)  # fmt: skip
    assert text.plain == "█" * 10 + "d" * 5 + "S" * 5
    assert [(s.start, s.end) for s in text.spans] == [(0, 10), (10, 15), (15, 20)]
