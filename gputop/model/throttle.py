"""Throttle time: how long each clock-event reason was active per GPU, by one rule for
/metrics (``gputop_gpu_throttle_seconds``) and ``gputop report`` (they used two). Pure.

The rule. NVML's reasons bitmask (``nvmlDeviceGetCurrentClocksEventReasons``) is the state
at the moment of the reading, not a summary of the time before it. So a reading stands for
the time until the next reading of that GPU: the interval is charged to the reasons of the
reading that began it (sample and hold), when the next one arrives, so a counter only ever
counts time already past. A reading that shows no reason (none active, NVML gave no mask, the
GPU was lost) stands for none. An interval of ``MAX_HOLD_S`` or more is a gap (the monitor
paused, the machine slept, the sampler hung): nothing was observed there, so it counts for no
reason; the verdict's time in the report drops such gaps the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputop.model.gpu import GpuSample

MAX_HOLD_S = 60.0
"""Longest interval a reading's reasons are held over; a longer gap counts for nothing."""


@dataclass
class ThrottleClock:
    """Each GPU's last reading, so each new one can say how many seconds which reasons held."""

    last: dict[int, tuple[float, tuple[str, ...]]] = field(default_factory=dict)
    """GPU index -> (time of its last reading, the reasons it showed)."""

    def charge(self, s: GpuSample) -> tuple[float, tuple[str, ...]]:
        """(seconds, reasons) this reading closes: the time since that GPU's last reading,
        charged to the reasons that reading showed. (0.0, ()) when nothing is to be charged."""
        prev = self.last.get(s.index)
        self.last[s.index] = (s.t, tuple(s.reasons) if s.lost is None else ())
        if prev is None:
            return 0.0, ()
        t, reasons = prev
        dt = s.t - t
        if not reasons or not 0 < dt < MAX_HOLD_S:
            return 0.0, ()
        return dt, reasons
