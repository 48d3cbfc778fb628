"""The budget over time: steps filed into the interval their reading came in, a periodic cost
a pattern of columns, each closed interval's budget computed as the window's is."""

from __future__ import annotations

from builders import job_readings as readings

from gputop.diagnose.budget_bins import BudgetBins
from gputop.model.steps import AgentsSample
from gputop.vocab import budget as b


def test_a_checkpoint_every_ten_seconds_is_a_column_every_other_interval():
    bins = BudgetBins(seconds=5.0)
    for r in readings(every_save=10, seconds=41):
        bins.add(r)
    shares = [i.budget.share(b.CHECKPOINT) if i.budget else None for i in bins.closed]
    assert len(shares) == 8
    saved = [s is not None and s > 0.05 for s in shares]
    assert saved in ([False, True] * 4, [True, False] * 4), shares
    for i in bins.closed:
        assert i.budget is not None
        assert abs(sum(s.share for s in i.budget.slices) - 1) < 1e-9
        assert abs(i.budget.share(b.DATA) / (i.budget.share(b.COMPUTE)) - 0.25) < 1e-6


def test_the_ranks_waiting_for_a_straggler_wait_for_it_in_every_interval():
    bins = BudgetBins(seconds=5.0)
    for r in readings(every_save=1000, seconds=16, ranks=3, slow_rank=2):
        bins.add(r)
    assert len(bins.closed) == 3
    for i in bins.closed:
        assert i.budget is not None
        assert i.budget.typical.rank != 2
        assert i.budget.share(b.STRAGGLER) > 0.2
        slow = next(r for r in i.budget.ranks if r.rank == 2)
        assert slow.shares[b.STRAGGLER] == 0


def test_a_gap_leaves_empty_intervals_and_only_as_many_as_are_kept():
    bins = BudgetBins(seconds=5.0, keep=4)
    it = readings(every_save=1000, seconds=3)
    first = next(it)
    bins.add(first)
    later = AgentsSample(target=100, t=3600.0, wall=1e9 + 3600, agents=first.agents)
    bins.add(later)
    closed = bins.closed
    assert len(closed) == 4
    # intervals from the first reading (t=1): the gap's last four, the reading's own open
    assert [i.start for i in closed] == [3576.0, 3581.0, 3586.0, 3591.0]
    assert all(i.budget is None for i in closed)
    assert bins.open_start == 3596.0


def test_steps_repeated_by_later_readings_count_once():
    bins = BudgetBins(seconds=5.0)
    rs = list(readings(every_save=1000, seconds=11))
    for r in rs:
        bins.add(r)
        bins.add(r)  # the same reading twice: no new steps
    steps = [i.budget.typical.steps for i in bins.closed if i.budget]
    assert steps == [50, 50]  # readings at t=1..5, then 6..10 (the first opens the first)


def test_bins_going_on_from_where_others_stopped_file_the_same_steps_in_the_same_intervals():
    # a recording's reader summarises the minutes after its last summary with new bins seeded
    # from the old ones' open interval: the result is the uninterrupted bins' intervals
    whole, first = BudgetBins(seconds=5.0), BudgetBins(seconds=5.0)
    got = list(readings(every_save=3, seconds=23, ranks=2))
    for r in got:
        whole.add(r)
    for r in got[:15]:  # stops at the last reading of the interval that began at 11 s: the next
        first.add(r)  # reading closes it, with the steps read before
    start = first.open_start
    assert start == 11.0
    rest = BudgetBins(seconds=5.0, cursors=first.open_cursors, start=start, counted=first.counted)
    for r in got[15:]:
        rest.add(r)
    later = [i for i in whole.closed if i.start >= start]
    assert [i.start for i in rest.closed] == [i.start for i in later] == [11.0, 16.0]
    for a, b_ in zip(rest.closed, later, strict=True):
        assert a.budget is not None and b_.budget is not None
        assert [(r.rank, r.steps, dict(r.shares)) for r in a.budget.ranks] == [
            (r.rank, r.steps, dict(r.shares)) for r in b_.budget.ranks
        ]
