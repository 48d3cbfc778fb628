"""A Window: the samples of one series over a span of time, and the statistics the verdict reads.

Pure: the caller says what "now" is, nothing here reads a clock. Missing values (``None``) are
skipped by every statistic, so a field that went "n/a" for a while does not drag a mean to zero.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar


class Timed(Protocol):
    """All a Window needs of a reading: its monotonic time ``t``, so any source can be windowed."""

    @property
    def t(self) -> float: ...


S = TypeVar("S", bound=Timed)
Field = str | Callable[[Any], Any]


def _getter(f: Field) -> Callable[[Any], Any]:
    if callable(f):
        return f
    return lambda s: getattr(s, f)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of already sorted values."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@dataclass(frozen=True)
class Window(Generic[S]):
    """Samples (oldest first) observed in ``[start, end]``."""

    samples: tuple[S, ...]
    start: float
    end: float

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def latest(self) -> S | None:
        return self.samples[-1] if self.samples else None

    @property
    def span(self) -> float:
        """Seconds between the first and the last sample (0 with fewer than two)."""
        return self.samples[-1].t - self.samples[0].t if len(self.samples) > 1 else 0.0

    def values(self, f: Field) -> list[float]:
        get = _getter(f)
        return [v for v in (get(s) for s in self.samples) if v is not None]

    def mean(self, f: Field) -> float | None:
        vs = self.values(f)
        return sum(vs) / len(vs) if vs else None

    def min(self, f: Field) -> float | None:
        vs = self.values(f)
        return min(vs) if vs else None

    def max(self, f: Field) -> float | None:
        vs = self.values(f)
        return max(vs) if vs else None

    def percentile(self, f: Field, q: float) -> float | None:
        vs = sorted(self.values(f))
        return percentile(vs, q) if vs else None

    def rate(self, f: Field) -> float | None:
        """Per-second rate of a cumulative counter (energy, bytes), from monotonic-time deltas.

        A counter that goes backwards (driver reload, wrap) contributes nothing for that step
        rather than a huge negative rate.
        """
        get = _getter(f)
        points = [(s.t, get(s)) for s in self.samples]
        points = [(t, v) for t, v in points if v is not None]
        total = 0.0
        elapsed = 0.0
        for (t0, v0), (t1, v1) in itertools.pairwise(points):
            if t1 <= t0 or v1 < v0:
                continue
            total += v1 - v0
            elapsed += t1 - t0
        return total / elapsed if elapsed > 0 else None
