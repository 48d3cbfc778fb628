"""A GPU's history lines: fixed scales, the last readings that fit, the reasons line second
while a reason holds."""

from __future__ import annotations

from builders import device, gpu_sample
from rich.style import Style

from gputop.ui.gpu_text import BLOCKS, HISTORY_LABEL, HISTORY_NOW, history_lines, tall_spark


def style(level: str) -> Style:
    return Style(bold=level == "bad")


def plain(lines):
    return [line.plain for line in lines]


def test_four_lines_activity_clock_power_reasons():
    history = [gpu_sample(0, float(t)) for t in range(30)]
    lines = plain(history_lines(device(0), history, style, 80, 4))
    assert [line.split()[0] for line in lines] == ["SMact", "SM", "power", "held"]
    assert lines[0].endswith("80%") and lines[1].endswith("1980/1980MHz")
    assert lines[2].endswith("650/700W") and lines[3].endswith("none now")


def test_a_throttled_gpu_says_where_the_reasons_held_second():
    history = [gpu_sample(0, float(t), ("sw_power_cap",) if t >= 20 else ()) for t in range(30)]
    lines = history_lines(device(0), history, style, 80, 2)
    held = lines[1].plain
    assert held.split()[0] == "held" and held.endswith("now")
    marks = held[HISTORY_LABEL : len(held) - HISTORY_NOW].strip()
    assert marks == "·" * 20 + "P" * 10
    assert any(s.style == Style(bold=True) for s in lines[1].spans)  # the letters are bad


def test_only_the_last_readings_that_fit_are_read():
    old = [gpu_sample(0, float(t), sm_active_pct=0.0) for t in range(500)]
    new = [gpu_sample(0, 500.0 + t, sm_active_pct=100.0) for t in range(100)]
    line = history_lines(device(0), old + new, style, 80, 1)[0].plain
    graph = line[HISTORY_LABEL : len(line) - HISTORY_NOW]
    assert graph == BLOCKS[-1] * (80 - HISTORY_LABEL - HISTORY_NOW)


def test_utilisation_when_sm_activity_is_missing():
    history = [gpu_sample(0, float(t), sm_active_pct=None) for t in range(10)]
    lines = plain(history_lines(device(0), history, style, 80, 1))
    assert lines[0].split()[0] == "util" and lines[0].endswith("90%")


def test_no_room_no_lines():
    history = [gpu_sample(0, 1.0)]
    assert history_lines(device(0), history, style, 80, 0) == []
    assert history_lines(device(0), history, style, 20, 4) == []


def test_with_rows_to_spare_memory_temperature_dram_then_a_taller_graph():
    history = [gpu_sample(0, float(t), util_gpu_pct=50, sm_active_pct=50.0) for t in range(30)]
    lines = plain(history_lines(device(0), history, style, 80, 7))
    assert [line.split()[0] for line in lines[4:]] == ["memory", "temp", "dram"]
    tall = plain(history_lines(device(0), history, style, 80, 11))
    assert len(tall) == 11
    assert tall[0].split()[:2] == ["SMact", "┤"] and tall[0].endswith("50%")
    w = 80 - HISTORY_LABEL - HISTORY_NOW
    graph = [
        line[HISTORY_LABEL : HISTORY_LABEL + w] for line in tall[:5]
    ]  # 5 rows: 50% fills the lower half
    assert [g.strip()[:1] for g in graph] == ["", "", "▄", "█", "█"], tall
    assert all(line.rstrip() for line in tall)  # every row says something (its axis at least)


def test_a_tall_graph_is_the_values_in_eighths_of_a_row():
    assert tall_spark([0.0, 50.0, 100.0, None], 0, 100, 4, 2) == ["  █ ", " ██ "]
    assert tall_spark([25.0], 0, 100, 3, 1) == ["  ▂"]
