"""One way to say a span of time, for the risks, the report and the HTML page alike."""

from __future__ import annotations

import math

import pytest

from gputop.model.durations import duration_text


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(0, "0 s"), (45.4, "45 s"), (119, "119 s"), (150, "2.5 min"), (599, "10.0 min"),
     (960, "16 min"), (7199, "120 min"), (7200, "2.0 h"), (11520, "3.2 h")],
)  # fmt: skip
def test_seconds_then_minutes_then_hours(seconds, said):
    assert duration_text(seconds) == said


@pytest.mark.parametrize("seconds", [math.inf, math.nan, -1.0])
def test_a_span_no_clock_gives_is_unknown(seconds):
    assert duration_text(seconds) == "unknown"
