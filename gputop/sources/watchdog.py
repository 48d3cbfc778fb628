"""Run a source's calls on a worker thread with a deadline, so a wedged driver cannot freeze us.

A hung NVML call (btop #1084 shows a whole TUI frozen and unkillable by one) cannot be cancelled
from Python. So the call runs on a dedicated daemon thread; the caller waits at most ``timeout``
seconds; while that call is still stuck, further calls fail fast with ``SourceStalled`` instead
of queueing behind it. When the driver comes back, the next call goes through again.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from gputop.errors import CannotDo

T = TypeVar("T")


class SourceStalled(CannotDo):
    """The source did not answer in time; ``since`` is when the stuck call started. The live
    modes go on without it; a command that needs its reading stops with the message."""

    when = "the driver did not answer a reading a command needs in time"

    def __init__(self, name: str, since: float, timeout: float) -> None:
        self.since = since
        super().__init__(
            f"{name} has not answered for over {timeout:g} s (a wedged driver?); "
            "gputop keeps running with the other sources and retries when it answers"
        )


class Watchdog:
    """A deadline on a source's calls: a hung call costs its caller ``timeout``, not the monitor."""

    def __init__(self, name: str, timeout: float = 2.0) -> None:
        self.name = name
        self.timeout = timeout
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], _Slot] | None] = queue.SimpleQueue()
        self._busy_since: float | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name=f"gputop-{name}", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return  # closed
            fn, slot = job
            try:
                slot.value = fn()
            except BaseException as e:  # handed back to the caller, who re-raises it
                slot.error = e
            with self._lock:
                self._busy_since = None
            slot.done.set()

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the worker thread; raises SourceStalled past the deadline."""
        with self._lock:
            if self._busy_since is not None:
                raise SourceStalled(self.name, self._busy_since, self.timeout)
            self._busy_since = time.monotonic()
            started = self._busy_since
        slot = _Slot()
        self._jobs.put((fn, slot))
        if not slot.done.wait(self.timeout):
            raise SourceStalled(self.name, started, self.timeout)
        if slot.error is not None:
            raise slot.error
        return slot.value

    def close(self) -> None:
        """The worker thread ends once its current call (if any) returns; no calls after."""
        self._jobs.put(None)

    @property
    def stalled(self) -> bool:
        with self._lock:
            return self._busy_since is not None


class _Slot:
    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
