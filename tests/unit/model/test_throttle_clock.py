"""Throttle time by one rule for /metrics and the report (``ThrottleClock``): a reading's
reasons hold until that GPU's next reading; a gap of a minute or more, a lost GPU, or time going
backwards count for no reason."""

from __future__ import annotations

from builders import gpu_sample

from gputop.model.gpu import GpuSample
from gputop.model.throttle import MAX_HOLD_S, ThrottleClock


def test_a_readings_reasons_hold_until_the_next_reading_of_that_gpu():
    clock = ThrottleClock()
    charges = [
        clock.charge(s)
        for s in (
            gpu_sample(0, 10.0, ("sw_power_cap",)),
            gpu_sample(1, 10.0),
            gpu_sample(0, 10.5, ("sw_power_cap", "hw_slowdown")),
            gpu_sample(0, 11.5),
            gpu_sample(1, 12.0, ("sw_thermal",)),
            gpu_sample(0, 12.0),
        )
    ]
    assert charges == [(0.0, ()), (0.0, ()), (0.5, ("sw_power_cap",)),
                       (1.0, ("sw_power_cap", "hw_slowdown")), (0.0, ()), (0.0, ())]  # fmt: skip


def test_a_gap_or_a_lost_gpu_counts_for_no_reason():
    clock = ThrottleClock()
    clock.charge(gpu_sample(0, 0.0, ("sw_thermal",)))
    assert clock.charge(gpu_sample(0, MAX_HOLD_S, ("sw_thermal",))) == (0.0, ())
    assert clock.charge(gpu_sample(0, MAX_HOLD_S + 1)) == (1.0, ("sw_thermal",))
    clock.charge(GpuSample(0, 100.0, 100.0, lost="fell off the bus"))
    assert clock.charge(gpu_sample(0, 101.0)) == (0.0, ())
    assert clock.charge(gpu_sample(0, 100.5, ("sw_thermal",))) == (0.0, ())  # time went back
