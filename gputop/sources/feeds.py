"""The sources a session reads and how often: one table for the TUI's sampler threads and the
headless loop, so `gputop diagnose`, `gputop record` and the screen read at the same rates.

GPUs and the process tree follow the refresh interval; the agents' steps are read at least
every second (steps are fast and the link's buffer is bounded); py-spy keeps its own budget of
one dump a second per main process whatever the screen does (docs/facts/capture.md, "py-spy's
cost").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from gputop.vocab.stacks import STACKS_PERIOD_S

if TYPE_CHECKING:
    from gputop.model import DeviceInfo, GpuSample
    from gputop.model.host import HostSample
    from gputop.model.stacks import StacksSample
    from gputop.model.steps import AgentsSample

AGENTS_MAX_PERIOD_S = 1.0
"""The agents' steps are read at least this often."""


T_co = TypeVar("T_co", covariant=True)


class Source(Protocol[T_co]):
    """What every source a session polls offers: ``sample()``, one reading now (it may block: a
    feed's ``timeout`` bounds it). ``NvmlSource`` and ``NoGpus`` (the GPUs), ``HostSource`` (the
    process tree), ``AgentLink`` (the agents' steps), ``StackSource`` (py-spy) are sources.
    Closing is not the feeds' business: NVML's owner closes it (``Gpus.close``)."""

    def sample(self) -> T_co: ...


@dataclass(frozen=True)
class Feed:
    """One source of a session: what it reads, how often, and how long a read may hang."""

    kind: str
    """The session's name for its readings: gpu, host, agents or stacks."""
    source: Source[object]
    period: float
    """Seconds between readings at the current refresh interval."""
    what: str
    """The source as a user knows it (the stalled-source message names it)."""
    timeout: float
    """Seconds before a read counts as stalled (a wedged driver, a stuck py-spy)."""
    max_period: float = float("inf")
    fixed: bool = False
    """Keeps its own rate when the refresh interval changes."""

    def read(self) -> object:
        """One reading of the source (the samplers and the headless loop call this)."""
        return self.source.sample()

    def at(self, interval: float) -> float:
        """The period at a refresh interval of ``interval`` seconds."""
        return self.period if self.fixed else min(interval, self.max_period)


def feeds(
    gpu: Source[Sequence[GpuSample]],
    host: Source[HostSample] | None = None,
    agents: Source[AgentsSample] | None = None,
    stacks: Source[StacksSample] | None = None,
    interval: float = 2.0,
) -> list[Feed]:
    """The feeds of a session, in the order a loop reads them."""
    out = [Feed("gpu", gpu, interval, "NVML", max(2.0, interval))]
    if host is not None:
        out.append(Feed("host", host, interval, "the process reader", 5.0))
    if agents is not None:
        out.append(
            Feed(
                "agents",
                agents,
                min(interval, AGENTS_MAX_PERIOD_S),
                "the agent link",
                5.0,
                max_period=AGENTS_MAX_PERIOD_S,
            )
        )
    if stacks is not None:
        out.append(Feed("stacks", stacks, STACKS_PERIOD_S, "py-spy", 30.0, fixed=True))
    return out


class GpuSource(Source["Sequence[GpuSample]"], Protocol):
    """A GPU source as the screen needs it (``NvmlSource`` and ``NoGpus`` are ones): its
    readings and its boards."""

    @property
    def devices(self) -> tuple[DeviceInfo, ...]: ...


class NoGpus:
    """The GPU source when NVML cannot be used (no driver, a recording without GPUs): no
    devices, no readings, and the reason, which the screen and reports show."""

    devices: tuple[DeviceInfo, ...] = ()
    capabilities = None

    def __init__(self, reason: str | None = None) -> None:
        self.reason = reason

    def sample(self) -> list[GpuSample]:
        return []

    def close(self) -> None:
        pass
