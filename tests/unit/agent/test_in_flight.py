"""The union of the times a step's collectives were outstanding (agent/in_flight.py)."""

from __future__ import annotations

import threading

from gputop.agent.in_flight import EDGES_KEPT, InFlight


def test_overlapping_calls_count_once_and_gaps_not_at_all():
    f = InFlight()
    f.issued(10), f.issued(15), f.completed(30), f.completed(40)  # 10..40 with two outstanding
    f.issued(60), f.completed(70)  # a gap of 20, then 10 more
    assert f.take(100) == 30 + 10


def test_edges_that_arrive_out_of_order_from_other_threads_are_sorted():
    f = InFlight()
    f.completed(40), f.issued(10), f.completed(25), f.issued(20)
    assert f.take(50) == 30


def test_a_call_outstanding_at_the_boundary_is_split_between_the_steps():
    f = InFlight()
    f.issued(80)
    assert f.take(100) == 20  # this step: 80..100
    f.completed(130)
    assert f.take(200) == 30  # the next: 100..130
    assert f.take(300) == 0


def test_more_completions_than_issues_never_make_time_negative_or_stick():
    f = InFlight()
    f.completed(5), f.completed(6)  # their issues were dropped (or came before the agent)
    f.issued(10), f.completed(20)
    assert f.take(30) == 10
    f.issued(40), f.completed(45)
    assert f.take(50) == 5


def test_a_loop_that_never_ends_a_step_keeps_bounded_memory():
    f = InFlight()
    for t in range(0, 4 * EDGES_KEPT, 2):
        f.issued(t), f.completed(t + 1)
    assert len(f._edges) == EDGES_KEPT
    assert 0 < f.take(10**9) <= EDGES_KEPT // 2


def test_edges_from_several_threads_are_all_counted():
    f = InFlight()

    def calls(base: int) -> None:
        for i in range(500):
            f.issued(base + 10 * i), f.completed(base + 10 * i + 1)

    threads = [threading.Thread(target=calls, args=(b * 100_000,)) for b in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert f.take(10**9) == 4 * 500
