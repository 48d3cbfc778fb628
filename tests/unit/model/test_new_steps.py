"""``new_steps``: each step of an agent counted once across readings that repeat hundreds of
them, and counting goes on when an agent restarts and numbers from 0 again (the report's
summaries and the Prometheus counters both rely on it)."""

from __future__ import annotations

from types import MappingProxyType

from gputop.model.steps import StepRecord, new_steps


def steps(numbers, start_ns=0):
    return tuple(
        StepRecord(n, start_ns + i * 10, 10, MappingProxyType({})) for i, n in enumerate(numbers)
    )


def test_each_step_once_across_overlapping_readings():
    first = steps(range(0, 5))
    fresh, cursor = new_steps(first, None)
    assert [s.step for s in fresh] == [0, 1, 2, 3, 4] and cursor == (4, 40)
    again = steps(range(2, 8), start_ns=20)
    fresh, cursor = new_steps(again, cursor)
    assert [s.step for s in fresh] == [5, 6, 7] and cursor == (7, 70)
    fresh, same = new_steps(again, cursor)
    assert fresh == () and same == cursor
    assert new_steps((), cursor) == ((), cursor)


def test_a_restarted_agent_counts_on_from_its_step_0():
    _, cursor = new_steps(steps(range(100, 105)), None)
    restarted = steps(range(0, 3), start_ns=10_000)  # later in time, lower numbers
    fresh, cursor = new_steps(restarted, cursor)
    assert [s.step for s in fresh] == [0, 1, 2] and cursor == (2, 10_020)
