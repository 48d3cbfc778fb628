"""How the main screen shares its free rows: nothing at 24 rows or fewer, the chart's first
rows, each GPU's history, the chart the rest."""

from __future__ import annotations

import pytest

from gputop.ui.room import CHART_FIRST, HISTORY_MAX, Room, share


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
