"""How the main screen shares its rows: on a short screen a line per GPU before the panes take
theirs; the free rows: nothing at 24 rows or fewer, the chart's first rows, each GPU's history,
the chart the rest."""

from __future__ import annotations

import pytest

from gputop.ui.room import CHART_FIRST, HISTORY_MAX, PANES_MIN, Room, fit, share


@pytest.mark.parametrize("rows", [10, 24])
def test_a_small_terminal_gets_nothing_more(rows):
    assert share(rows, 12, 2, chart=True) == Room(0, (0, 0))


def test_the_chart_first_then_each_gpu_then_the_chart_again():
    room = share(40, 20, 2, chart=True)
    assert room == Room(CHART_FIRST + 20 - CHART_FIRST - 2 * HISTORY_MAX, (4, 4))


def test_the_first_gpus_get_a_line_more_when_rows_do_not_divide():
    assert share(40, 15, 8, chart=False) == Room(0, (2, 2, 2, 2, 2, 2, 2, 1))
    assert share(40, 8, 3, chart=True) == Room(6, (1, 1, 0))


def test_without_a_chart_the_gpus_take_every_row():
    assert share(50, 31, 2, chart=False) == Room(0, (16, 15))
    assert share(50, 3, 1, chart=False) == Room(0, (3,))


def test_too_few_rows_for_a_chart_go_to_the_gpus():
    assert share(30, 3, 1, chart=True) == Room(0, (3,))


@pytest.mark.parametrize("free", range(0, 60, 3))
@pytest.mark.parametrize("gpus", [0, 1, 2, 8])
def test_never_more_than_the_free_rows(free, gpus):
    room = share(60, free, gpus, chart=True)
    assert room.chart + sum(room.history) == (free if gpus or room.chart else 0)
    if room.chart:
        assert all(0 <= h <= HISTORY_MAX for h in room.history)


def test_panes_that_fit_with_two_lines_per_gpu_leave_the_rest_shared_as_before():
    # 40 rows: 3 fixed (header, status, key bar), panes ask 15, two GPUs take 2 each
    assert fit(40, 3, 15, 2, chart=True) == share(40, 40 - 3 - 15 - 4, 2, chart=True)


def test_short_rows_give_each_gpu_its_first_line_before_the_panes_give_up_theirs():
    # 24 rows, 3 fixed: panes asking 18 and two GPUs of two lines need 22; one line each fits
    room = fit(24, 3, 18, 2, chart=True)
    assert (room.gpu_lines, room.panes_max, room.chart, room.history) == (1, None, 0, (0, 0))
    # panes asking 25 with 8 GPUs: the panes keep what the GPUs' lines leave
    room = fit(24, 3, 25, 8, chart=True)
    assert (room.gpu_lines, room.panes_max) == (1, 24 - 3 - 8)


def test_more_gpus_than_rows_leave_the_verdict_its_head_and_the_gpus_scroll():
    room = fit(24, 3, 20, 32, chart=False)
    assert room.gpu_lines == 1 and room.panes_max == PANES_MIN


@pytest.mark.parametrize("asked", range(0, 40, 3))
@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_the_fixed_rows_and_a_line_per_gpu_are_never_given_to_the_panes(asked, gpus):
    room = fit(24, 3, asked, gpus, chart=True)
    panes = asked if room.panes_max is None else room.panes_max
    assert 3 + panes + gpus * room.gpu_lines + room.chart + sum(room.history) <= 24
