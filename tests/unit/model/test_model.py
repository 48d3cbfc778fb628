"""Ring, Timeline and Window: bounded memory, correct time queries, correct statistics."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputop.model import GpuSample, Ring, Timeline, Window, percentile


@dataclass(frozen=True)
class P:
    t: float
    v: float | None = None
    key: tuple = ("x", 0)


def test_ring_keeps_newest_items_in_order_once_full():
    r: Ring[int] = Ring(3)
    for i in range(5):
        r.append(float(i), i)
    assert list(r) == [2, 3, 4]
    assert len(r) == 3
    assert r.latest() == 4


def test_ring_between_uses_timestamps_across_the_wrap():
    r: Ring[int] = Ring(4)
    for i in range(10):
        r.append(float(i), i)
    assert r.between(7.5, None) == [8, 9]
    assert r.between(0, None) == [6, 7, 8, 9]
    assert r.between(100, None) == []


def test_ring_refuses_time_going_backwards():
    r: Ring[int] = Ring(2)
    r.append(5.0, 1)
    with pytest.raises(ValueError, match="back in time"):
        r.append(4.0, 2)


def test_ring_rejects_zero_capacity():
    with pytest.raises(ValueError):
        Ring(0)


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200), st.integers(1, 50))
def test_ring_between_without_an_end_matches_a_plain_filter(times, cap):
    times = sorted(times)
    r: Ring[float] = Ring(cap)
    for t in times:
        r.append(t, t)
    kept = times[-cap:]
    cut = times[len(times) // 2]
    assert r.between(cut, None) == [t for t in kept if t >= cut]


@given(
    st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200),
    st.integers(1, 50),
    st.floats(0, 1e6, allow_nan=False),
    st.floats(0, 1e6, allow_nan=False),
)
def test_ring_between_matches_a_plain_filter_across_the_wrap(times, cap, t0, t1):
    times = sorted(times)
    r: Ring[float] = Ring(cap)
    for t in times:
        r.append(t, t)
    kept = times[-cap:]
    assert r.between(t0, t1) == [t for t in kept if t0 <= t <= t1]
    assert r.between(t0, None) == [t for t in kept if t >= t0]


def test_timeline_memory_is_bounded_per_series():
    tl = Timeline(capacity=10)
    for i in range(1000):
        tl.append(("gpu", 0), P(float(i)))
        tl.append(("gpu", 1), P(float(i)))
    assert len(tl) == 20
    assert sorted(tl.keys("gpu")) == [("gpu", 0), ("gpu", 1)]
    assert tl.latest(("gpu", 1)).t == 999.0


def test_timeline_window_selects_last_seconds_and_not_the_future():
    tl = Timeline()
    tl.extend(P(float(t), float(t)) for t in range(100))
    w = tl.window(("x", 0), now=50.0, seconds=10.0)
    assert [s.t for s in w.samples] == [float(t) for t in range(40, 51)]
    assert w.start == 40.0 and w.end == 50.0
    assert len(tl.window(("nope", 1), now=50.0, seconds=10.0)) == 0


def test_timeline_accepts_real_gpu_samples_by_their_key():
    tl = Timeline()
    tl.extend([GpuSample(index=3, t=1.0, wall=0.0, power_w=100.0)])
    assert tl.latest(("gpu", 3)).power_w == 100.0


def _w(values, times=None, end=None):
    times = times or [float(i) for i in range(len(values))]
    samples = tuple(P(t, v) for t, v in zip(times, values, strict=True))
    return Window(samples, start=times[0], end=end if end is not None else times[-1] + 1)


def test_window_statistics_skip_missing_values():
    w = _w([10.0, None, 30.0, 20.0])
    assert w.mean("v") == 20.0
    assert w.min("v") == 10.0
    assert w.max("v") == 30.0
    assert w.percentile("v", 50) == 20.0
    assert w.values(lambda s: s.v) == [10.0, 30.0, 20.0]


def test_window_statistics_of_nothing_are_none():
    w = _w([None, None])
    assert w.mean("v") is None and w.percentile("v", 90) is None and w.rate("v") is None


def test_percentile_interpolates():
    assert percentile([0.0, 10.0], 25) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == pytest.approx(4.6)
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_rate_of_a_counter_uses_monotonic_deltas_and_ignores_resets():
    # energy in J: 100 W for 2 s, then a driver reload resets it, then 200 W for 1 s
    w = _w([1000.0, 1100.0, 1200.0, 5.0, 205.0], times=[0.0, 1.0, 2.0, 3.0, 4.0])
    assert w.rate("v") == pytest.approx(400.0 / 3.0)


def test_window_latest_and_span():
    w = _w([1.0, 2.0, 3.0], times=[10.0, 11.0, 13.0])
    assert w.latest.v == 3.0
    assert w.span == 3.0


def test_warm_up_and_compile_steps_leave_the_step_statistics():
    from gputop.model.step_stats import usable
    from gputop.model.steps import StepRecord

    def step(i: int, ms: float) -> StepRecord:
        return StepRecord(i, i * 10**9, int(ms * 1e6), {})

    run = [
        step(0, 900),
        step(1, 700),
        step(2, 400),
        step(3, 12),
        *(step(i, 10) for i in range(4, 40)),
    ]
    kept = usable(run)
    assert [s.step for s in kept][:2] == [3, 4]  # the slow compile steps 1-2 are gone
    # a slow step later in the run is a spike to report, not warm-up
    late = [step(0, 900), *(step(i, 10) for i in range(1, 30)), step(30, 500)]
    assert usable(late)[-1].step == 30
    # past the first steps, nothing is dropped as warm-up
    resumed = [step(100, 10), step(101, 400), *(step(i, 10) for i in range(102, 120))]
    assert usable(resumed)[0].step == 101
