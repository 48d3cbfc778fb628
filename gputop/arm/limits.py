"""How often armed captures may fire: a job that flaps (its bound changing every few seconds
for hours) must not fill the disk or cost the job a capture a minute. Pure: times are passed in.

Per trigger, one capture in PER_TRIGGER_S; in all, at most MOST in WINDOW_S (a sliding
window)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

PER_TRIGGER_S = 600.0
"""One capture per trigger in ten minutes: a straggler that comes and goes every few seconds
is one event worth a trace, not fifty."""
MOST = 6
WINDOW_S = 3600.0
"""At most MOST armed captures an hour, whatever fires."""


@dataclass
class RateLimit:
    """The limits' state: when each trigger last fired, and the fires in the window."""

    per_trigger_s: float = PER_TRIGGER_S
    most: int = MOST
    window_s: float = WINDOW_S
    _last: dict[str, float] = field(default_factory=dict)
    _fired: deque[float] = field(default_factory=deque)

    def allow(self, trigger: str, t: float) -> str | None:
        """None when ``trigger`` may fire at ``t`` (and it is counted as fired), else why not
        in words."""
        while self._fired and t - self._fired[0] >= self.window_s:
            self._fired.popleft()
        last = self._last.get(trigger)
        if last is not None and t - last < self.per_trigger_s:
            return (f"{trigger} fired {t - last:.0f} s ago: one capture per "
                    f"{self.per_trigger_s / 60:g} min per trigger")  # fmt: skip
        if len(self._fired) >= self.most:
            return (f"{self.most} armed captures in the last {self.window_s / 60:g} min: the "
                    "limit in all")  # fmt: skip
        self._last[trigger] = t
        self._fired.append(t)
        return None
