"""The sampling threads: each reads a source every interval and posts what it got. Never
touches widgets; the app receives messages on its own thread (memray's thread -> message ->
reactive).

Collection goes on while the display is paused, and a wedged driver only produces
"stalled" messages (the Watchdog deadline), never a frozen screen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from textual.message import Message

from gputop.sources.feeds import Feed
from gputop.sources.watchdog import SourceStalled, Watchdog
from gputop.ui.messages import Reading, SourceTrouble


class Sampler:
    """A source's own thread, reading through a Watchdog: a wedged read never freezes the screen."""

    def __init__(
        self,
        read: Callable[[], Any],
        deliver: Callable[[Any], object],
        fail: Callable[[str], object],
        interval: float,
        watchdog: Watchdog | None = None,
        name: str = "gputop-sampler",
        max_interval: float = float("inf"),
        fixed: bool = False,
    ) -> None:
        self._read = read
        self._deliver = deliver
        self._fail = fail
        self.interval = interval
        self.max_interval = max_interval
        self.fixed = fixed
        """Keeps its own rate when the screen's interval changes (py-spy's budget)."""
        self._watchdog = watchdog or Watchdog("NVML", timeout=max(2.0, interval))
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.name = name
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def set_interval(self, seconds: float) -> None:
        self.interval = seconds
        self._wake.set()  # take the next reading on the new schedule

    def stop(self, timeout: float = 1.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        failing = False
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                result = self._watchdog.call(self._read)
            except SourceStalled as e:
                self._fail(str(e))
                failing = True
            except Exception as e:  # a source bug must not kill collection
                self._fail(f"reading the GPUs failed: {type(e).__name__}: {e}")
                failing = True
            else:
                if failing:
                    self._fail("")
                    failing = False
                self._deliver(result)
            wait = max(0.0, self.interval - (time.monotonic() - started))
            self._wake.wait(wait)
            self._wake.clear()


class Samplers:
    """One sampler thread per feed, each at its feed's own rate (``sources/feeds.py``), posting
    ``Reading`` and ``SourceTrouble`` messages through ``post``."""

    def __init__(self, feeds: Sequence[Feed], post: Callable[[Message], object]) -> None:
        self._post = post
        self._samplers = [
            Sampler(
                read=f.read,
                deliver=partial(self._deliver, f.kind),
                fail=lambda text: post(SourceTrouble(text)),
                interval=f.period,
                watchdog=Watchdog(f.what, timeout=f.timeout),
                name=f"gputop-{f.kind}-sampler",
                max_interval=f.max_period,
                fixed=f.fixed,
            )
            for f in feeds
        ]

    def _deliver(self, kind: str, value: object) -> None:
        self._post(Reading(kind, value))

    def start(self) -> None:
        for sampler in self._samplers:
            sampler.start()

    def follow(self, interval: float) -> None:
        """The screen's refresh interval changed: those that follow it read at the new pace."""
        for sampler in self._samplers:
            if not sampler.fixed:
                sampler.set_interval(min(interval, sampler.max_interval))

    def stop(self) -> None:
        for sampler in self._samplers:
            sampler.stop()
