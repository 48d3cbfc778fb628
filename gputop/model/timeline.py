"""The Timeline: one bounded ring per (source, key) series, the only history gputop keeps live."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from gputop.model.ring import Ring
from gputop.model.window import Window

SeriesKey = tuple[str, Hashable]

DEFAULT_CAPACITY = 4096
"""Samples kept per series: 68 minutes at 1 Hz, 6.8 minutes at 10 Hz."""


class Timeline:
    """Bounded history for every series; memory is fixed once each ring is full.

    Not thread-safe by design: sources post samples to the UI thread, which is the one writer.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._series: dict[SeriesKey, Ring[Any]] = {}

    def append(self, key: SeriesKey, sample: Any) -> None:
        ring = self._series.get(key)
        if ring is None:
            ring = self._series[key] = Ring(self.capacity)
        ring.append(sample.t, sample)

    def extend(self, samples: Iterable[Any]) -> None:
        """Append samples that carry their own ``key`` (GpuSample and friends)."""
        for s in samples:
            self.append(s.key, s)

    def keys(self, source: str | None = None) -> list[SeriesKey]:
        return [k for k in self._series if source is None or k[0] == source]

    def latest(self, key: SeriesKey) -> Any | None:
        ring = self._series.get(key)
        return ring.latest() if ring else None

    def __len__(self) -> int:
        return sum(len(r) for r in self._series.values())

    def window(self, key: SeriesKey, now: float, seconds: float) -> Window[Any]:
        """The samples of ``key`` from ``now - seconds`` to ``now`` (empty when unknown)."""
        start = now - seconds
        ring = self._series.get(key)
        samples = tuple(ring.between(start, now)) if ring else ()  # ring times are sample.t
        return Window(samples=samples, start=start, end=now)
