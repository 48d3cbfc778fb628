"""How long a step's collectives were in flight: from each call's issue to its completion
(a blocking call's return, an async one's future), the overlapping ones counted once.

Against the time the step waited for them (the ``grad_sync`` phase), this says how much of
the communication hid behind compute: DDP's buckets overlap backward, a loop's own blocking
``all_reduce`` hides nothing. Collectives start in the training thread and the autograd
thread and finish in the backend's thread, so each edge is one ``deque.append`` (atomic in
CPython: no lock on the training path); the step boundary sorts and sweeps them."""

from __future__ import annotations

import collections

EDGES_KEPT = 4096
"""Issue/completion edges kept between step boundaries (a loop that never ends a step drops
the oldest; the sweep never lets the count of open calls go below zero)."""


class InFlight:
    """The union of the intervals during which at least one collective was outstanding."""

    __slots__ = ("_edges", "_open", "_since")

    def __init__(self) -> None:
        self._edges: collections.deque[tuple[int, int]] = collections.deque(maxlen=EDGES_KEPT)
        self._open = 0
        """Calls outstanding at the last sweep."""
        self._since = 0
        """When the stretch still open at the last sweep began (it is counted from there)."""

    def issued(self, t: int) -> None:
        self._edges.append((t, 1))

    def completed(self, t: int) -> None:
        self._edges.append((t, -1))

    def take(self, now: int) -> int:
        """ns with a collective outstanding since the last ``take`` (a stretch still open is
        counted up to ``now`` and goes on from there)."""
        edges = []
        while self._edges:
            try:
                edges.append(self._edges.popleft())
            except IndexError:  # emptied by another thread between the check and the pop
                break
        edges.sort()
        busy = 0
        n, since = self._open, self._since
        for t, step in edges:
            if n == 0:
                if step > 0:
                    n, since = 1, t
                continue  # a completion whose issue was dropped: nothing was outstanding
            n += step
            if n == 0:
                busy += max(0, t - since)
        if n > 0:
            busy += max(0, now - since)
            since = now
        self._open, self._since = n, since
        return busy
