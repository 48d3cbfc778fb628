"""A call that hangs gives SourceStalled within the deadline, and later calls fail fast."""

from __future__ import annotations

import threading
import time

import pytest
from tests_support import until

from gputop.sources.watchdog import SourceStalled, Watchdog


def test_result_and_errors_pass_through():
    wd = Watchdog("test", timeout=1.0)
    assert wd.call(lambda: 42) == 42
    with pytest.raises(KeyError):
        wd.call(lambda: {}["missing"])


def test_hung_call_times_out_then_recovers():
    wd = Watchdog("NVML", timeout=0.2)
    release = threading.Event()
    t0 = time.monotonic()
    with pytest.raises(SourceStalled, match="NVML has not answered"):
        wd.call(release.wait)
    assert time.monotonic() - t0 < 1.0
    assert wd.stalled
    t1 = time.monotonic()
    with pytest.raises(SourceStalled):
        wd.call(lambda: 1)  # fails fast instead of queueing behind the stuck call
    assert time.monotonic() - t1 < 0.1
    release.set()
    until(lambda: not wd.stalled, timeout=20, what="the released call to return", every=0.01)
    assert wd.call(lambda: 2) == 2
