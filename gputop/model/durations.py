"""How a span of time is said to a user, once for every output: a risk's time to the limit,
a report's run length and each bound's time in the lead. Pure."""

from __future__ import annotations

import math

SECONDS_UNTIL = 120.0
"""Below two minutes a span is said in seconds (a 90-s one reads better as "90 s")."""
MINUTES_UNTIL = 7200.0
"""Below two hours, in minutes; then in hours."""


def duration_text(seconds: float) -> str:
    """``seconds`` as "45 s", "2.5 min", "16 min" or "3.2 h": a decimal only where the whole
    number would hide a fifth of the span or more. A number no clock gives says so."""
    if not math.isfinite(seconds) or seconds < 0:
        return "unknown"
    if seconds < SECONDS_UNTIL:
        return f"{seconds:.0f} s"
    if seconds < MINUTES_UNTIL:
        minutes = seconds / 60
        return f"{minutes:.1f} min" if minutes < 10 else f"{minutes:.0f} min"
    return f"{seconds / 3600:.1f} h"
