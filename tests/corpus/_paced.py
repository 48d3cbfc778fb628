"""Costs sized to a share of wall time, against the loop's own compute as it runs.

The mixed scenarios state their shares on the command line and the bench compares what
gputop measures with them. Only how long each cost lasts is paced; the work itself is what
real jobs do (a DataLoader worker waiting on a slow source, torch.save, an eval pass under
no_grad, a slow logging handler, Python bookkeeping, cyclic garbage, a collective), so gputop
sees each through its own mechanism. Measured against compute, the shares hold on a loaded
machine too: when compute slows, every cost slows with it.
"""

from __future__ import annotations

import time


class Pacer:
    """Credit per cost: each second of compute earns ``share / compute share`` seconds of each
    cost (``computed``), or each second of wall time ``share`` seconds (``tick``); a per-step
    cost spends its credit every step, a periodic one when the credit covers what it cost last
    time."""

    def __init__(self, shares: dict[str, float]) -> None:
        self.shares = {k: v for k, v in shares.items() if v > 0}
        self.compute_share = 1.0 - sum(self.shares.values())
        if self.compute_share <= 0:
            raise SystemExit("the shares leave no time for compute")
        self.credit = dict.fromkeys(self.shares, 0.0)
        self.last = dict.fromkeys(self.shares, 0.0)
        self.compute_s = 0.0
        """The loop's compute per step (a moving average)."""

    def computed(self, seconds: float) -> None:
        self.compute_s = seconds if not self.compute_s else 0.9 * self.compute_s + 0.1 * seconds
        for name, share in self.shares.items():
            self.credit[name] += seconds * share / self.compute_share

    def tick(self) -> None:
        """One step's wall time earns each cost its share of it (``share x wall``): the costs
        then take their shares of wall time whatever else the step spends (a collective the
        script cannot size, a machine that slows down)."""
        now = time.perf_counter()
        last = getattr(self, "_last_tick", None)
        self._last_tick = now
        if last is not None:
            for name, share in self.shares.items():
                self.credit[name] += (now - last) * share

    def owed(self, name: str) -> float:
        """Seconds a per-step cost should take now."""
        return max(0.0, self.credit.get(name, 0.0))

    def due(self, name: str) -> bool:
        """A periodic cost whose credit covers what it cost last time."""
        return name in self.shares and self.credit[name] >= self.last[name]

    def spent(self, name: str, seconds: float) -> None:
        if name in self.shares:
            self.credit[name] -= seconds
            self.last[name] = seconds

    def time(self, name: str):
        """``with pacer.time("eval"): ...`` spends what the block took."""
        return _Timed(self, name)


class _Timed:
    def __init__(self, pacer: Pacer, name: str) -> None:
        self.pacer, self.name = pacer, name

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.pacer.spent(self.name, time.perf_counter() - self.t0)


def busy(seconds: float) -> int:
    """Pure-Python work for about ``seconds`` (the loop's own bookkeeping)."""
    end = time.perf_counter() + seconds
    n = 0
    stats: dict[int, float] = {}
    while time.perf_counter() < end:
        for i in range(200):
            stats[i % 17] = stats.get(i % 17, 0.0) * 0.99 + i
        n += 1
    return n
