"""`gputop snapshot`'s two readings give every rate, NVLink included, within the settle time.

NVLink is read at most once per slow tier (2 s) by the monitor; the snapshot's second reading,
0.25 s after the first, reads it again (``fresh``) so its counters give a rate instead of
"needs two samples".
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

import pytest

from gputop.sim.activity import Activity, constant
from gputop.sim.boards import H100
from gputop.sim.scenarios import Scenario
from gputop.snapshot import SETTLE_S, sample_pair
from gputop.sources.nvml import SLOW_TIER_S
from gputop.sources.watchdog import Watchdog

NVLINK = Activity(duty=1.0, sm=0.8, occupancy=0.5, tensor=0.6, dram=0.4, nvlink=0.3)
EXPECTED_KIBPS = 0.3 * H100.nvlink_links * H100.nvlink_link_gbps * 1e9 / 1024


def test_snapshot_pair_gives_nvlink_rates_after_the_settle_time_only(sim):
    s = sim("h100x8", scenario=Scenario("allreduce", "NVLink busy", constant(NVLINK)))
    src = s.open()
    s.clock.advance(5.0)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        s.clock.advance(seconds)

    samples = sample_pair(src, Watchdog("NVML", timeout=5.0), sleep=sleep)
    assert slept == [SETTLE_S]  # no longer wait: only the slow tier is read again
    assert len(samples) == 8
    for g in samples:
        assert "nvlink_tx_kibps" not in g.na and "nvlink_rx_kibps" not in g.na
        assert g.nvlink_tx_kibps == pytest.approx(EXPECTED_KIBPS, rel=0.02)
        assert g.nvlink_rx_kibps == pytest.approx(EXPECTED_KIBPS, rel=0.02)
        assert g.sm_active_pct is not None  # GPM's 100 ms is within the settle time


def test_the_monitors_ticks_still_read_nvlink_once_a_slow_tier(sim):
    s = sim("h100", scenario=Scenario("allreduce", "NVLink busy", constant(NVLINK)))
    s.open()
    s.tick(5.0)
    (g,) = s.tick(SETTLE_S)  # an ordinary tick within the tier reuses the first read
    assert g.nvlink_tx_kibps is None and g.na["nvlink_tx_kibps"] == "needs two samples"
    (g,) = s.tick(SLOW_TIER_S)
    assert g.nvlink_tx_kibps == pytest.approx(EXPECTED_KIBPS, rel=0.02)


def test_gputop_snapshot_prints_nvlink_rates_on_h100x8():
    run = subprocess.run(
        [sys.executable, "-m", "gputop", "snapshot", "--json", "--sim-board", "h100x8"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tempfile.gettempdir(),  # the installed package, not the checkout
    )
    doc = json.loads(run.stdout)
    assert len(doc["devices"]) == 8
    for d in doc["devices"]:
        s = d["sample"]
        assert isinstance(s["nvlink_tx_kibps"], float) and isinstance(s["nvlink_rx_kibps"], float)
        assert "nvlink_tx_kibps" not in s["na"]
