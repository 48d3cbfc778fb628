"""Where a live session's readings go besides the screen: the recorder and the Prometheus
exporter. The TUI and the headless loop call every sink with the same readings, in the order
they ingest them, so a recording replays the session exactly and the exporter shows what the
screen shows.

A sink must not raise into the monitor: one that fails (disk full, port taken) says so once
through ``problem`` and goes quiet; the monitor keeps running with what it still has.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from gputop.diagnose import Verdict
from gputop.errors import BadInput
from gputop.model.gpu import DeviceInfo, GpuSample
from gputop.model.host import HostSample
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample

if TYPE_CHECKING:
    from gputop.diagnose import EvalPoint


class Sink(Protocol):
    """An output besides the screen (the recorder, the exporter): it takes every reading in ingest
    order and must not raise."""

    problem: str | None
    """One line saying why the sink stopped working (None while it works)."""

    def start(self, devices: Sequence[DeviceInfo], meta: dict[str, Any]) -> None:
        """Once, before any reading: the boards and what the session is (mode, target)."""

    def gpu(self, samples: Sequence[GpuSample]) -> None: ...

    def host(self, sample: HostSample) -> None: ...

    def agents(self, sample: AgentsSample) -> None: ...

    def stacks(self, sample: StacksSample) -> None: ...

    def verdict(self, point: EvalPoint, verdict: Verdict) -> None:
        """Every evaluation (an ``EvalPoint``: the window ends it was computed at)."""

    def event(self, t: float, wall: float, kind: str, data: dict[str, Any]) -> None:
        """Something that happened once: a capture's update, the target's exit."""

    def close(self) -> None: ...


class Sinks:
    """Fans every reading out to the sinks; a sink that raises is dropped with its reason."""

    def __init__(self, sinks: Sequence[Sink] = ()) -> None:
        self.sinks = list(sinks)
        self.problems: list[str] = []
        self.meta: dict[str, Any] = {}
        """What the session is (mode, target), given to the sinks at ``start``."""

    def __bool__(self) -> bool:
        return bool(self.sinks)

    def _each(self, method: str, *args: Any) -> None:
        for sink in list(self.sinks):
            try:
                getattr(sink, method)(*args)
            except Exception as e:  # a sink's bug must not stop the monitor
                sink.problem = sink.problem or f"{type(sink).__name__} stopped: {e}"
            if sink.problem:
                self.problems.append(sink.problem)
                self.sinks.remove(sink)
                with contextlib.suppress(Exception):  # already said why it stopped
                    sink.close()

    def start(self, devices: Sequence[DeviceInfo], meta: dict[str, Any]) -> None:
        self._each("start", devices, meta)

    def gpu(self, samples: Sequence[GpuSample]) -> None:
        self._each("gpu", samples)

    def host(self, sample: HostSample) -> None:
        self._each("host", sample)

    def agents(self, sample: AgentsSample) -> None:
        self._each("agents", sample)

    def stacks(self, sample: StacksSample) -> None:
        self._each("stacks", sample)

    def verdict(self, point: EvalPoint, verdict: Verdict) -> None:
        self._each("verdict", point, verdict)

    def event(self, t: float, wall: float, kind: str, data: dict[str, Any]) -> None:
        self._each("event", t, wall, kind, data)

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as e:
                self.problems.append(f"{type(sink).__name__} did not close cleanly: {e}")
            if sink.problem:  # the last write failed (disk full at the very end)
                self.problems.append(sink.problem)
        self.sinks = []


class SinkError(BadInput):
    """A sink asked for on the command line cannot start: one line, what to do. The recorder's
    and the exporter's errors are its kinds."""

    when = "an output asked for on the command line (--record, --prometheus) cannot start"
