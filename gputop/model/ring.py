"""A fixed-capacity ring of time-stamped items: the memory of a series never grows."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class Ring(Generic[T]):
    """Keeps the newest ``capacity`` items with non-decreasing timestamps.

    Timestamps live in a preallocated ``array('d')`` and items in a preallocated list, so once
    the ring is full, appending replaces the oldest slot and allocates nothing new.
    """

    __slots__ = ("_items", "_len", "_start", "_times", "capacity")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"ring capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._times = array("d", bytes(8 * capacity))
        self._items: list[T | None] = [None] * capacity
        self._start = 0
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def _slot(self, i: int) -> int:
        return (self._start + i) % self.capacity

    def time_at(self, i: int) -> float:
        """Timestamp of the i-th oldest item (supports ``bisect`` through ``__getitem__``)."""
        return self._times[self._slot(i)]

    def __getitem__(self, i: int) -> float:
        return self.time_at(i)

    def append(self, t: float, item: T) -> None:
        if self._len and t < self.time_at(self._len - 1):
            raise ValueError(
                f"timestamps must not go back in time: {t} after {self.time_at(self._len - 1)}"
            )
        if self._len < self.capacity:
            slot = self._slot(self._len)
            self._len += 1
        else:
            slot = self._start
            self._start = (self._start + 1) % self.capacity
        self._times[slot] = t
        self._items[slot] = item

    def latest(self) -> T | None:
        return self._items[self._slot(self._len - 1)] if self._len else None

    def between(self, t0: float, t1: float | None) -> list[T]:
        """Items with t0 <= timestamp <= t1 (no upper bound when None), oldest first: two
        binary searches, then at most two slices of the storage (the verdict takes a window of
        every series after every reading)."""
        first = bisect_left(self, t0, 0, self._len)
        end = self._len if t1 is None else bisect_right(self, t1, first, self._len)
        if first >= end:
            return []
        a, b = self._slot(first), self._slot(end - 1) + 1
        if a < b:
            return cast("list[T]", self._items[a:b])  # slots in [0, len) all hold items
        return cast("list[T]", self._items[a:] + self._items[:b])

    def __iter__(self) -> Iterator[T]:
        for i in range(self._len):
            yield self._items[self._slot(i)]  # type: ignore[misc]
