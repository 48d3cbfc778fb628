"""py-spy's CPU budget: what it reads first, how often, and that it keeps to its share."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.model.roles import MAIN, RANK, WORKER
from gputop.model.stacks import ProcessStacks, StacksSample, ThreadStack, reads
from gputop.sources.stack_budget import (
    FIRST_COST_S,
    QUIET_SLOWER,
    SETTLED,
    WORKER_TURN,
    Candidate,
    StackBudget,
)


def job(ranks: int, workers: int) -> list[Candidate]:
    """A launcher, its ranks, and each rank's workers (pids 100+, 1000+r*100+w)."""
    out = [Candidate(1, MAIN, 0, 0, None)]
    for r in range(ranks):
        out.append(Candidate(100 + r, RANK, 1, 0, None))
        out += [Candidate(1000 + r * 100 + w, WORKER, 100 + r, 0, None) for w in range(workers)]
    return out


def run(budget: StackBudget, tree: list[Candidate], seconds: int, cost: float,
        still: dict[int, int] | None = None) -> dict[int, list[float]]:  # fmt: skip
    """Ticks of one second; every dump costs ``cost``; returns pid -> times read."""
    read: dict[int, list[float]] = {c.pid: [] for c in tree}
    for now in range(seconds):
        cands = [
            replace(c, still=(still or {}).get(c.pid, 0),
                    last_read=read[c.pid][-1] if read[c.pid] else None)
            for c in tree
        ]  # fmt: skip
        for pid in budget.due(float(now), cands):
            read[pid].append(float(now))
            budget.spent(cost)
    return read


@settings(max_examples=60, deadline=None)
@given(
    share=st.floats(0.005, 0.2),
    cost=st.floats(0.005, 0.08),
    ranks=st.integers(0, 16),
    workers=st.integers(0, 8),
)
def test_it_never_spends_more_than_its_share(share, cost, ranks, workers):
    budget = StackBudget(share)
    seconds = 120
    run(budget, job(ranks, workers), seconds, cost)
    # what it may spend: its share over the run, the first dump, and one dump of overshoot
    assert budget.used <= share * seconds + FIRST_COST_S + cost + 1e-9


def test_ranks_come_before_workers_and_each_ranks_workers_share_a_turn():
    budget = StackBudget(0.25)  # room for ~12 dumps a second at 20 ms
    reads_of = run(budget, job(8, 8), 60, 0.02)
    ranks = [len(reads_of[100 + r]) for r in range(8)]
    assert min(ranks) >= 50, ranks  # about once a second each
    per_rank_workers = [sum(len(reads_of[1000 + r * 100 + w]) for w in range(8)) for r in range(8)]
    # each rank's eight workers share one read per WORKER_TURN periods at least, after a first
    # read each, and the tokens the ranks leave at most one a period: never two at once
    assert all(12 <= n <= 60 for n in per_rank_workers), per_rank_workers
    each = [len(reads_of[1000 + r * 100 + w]) for r in range(8) for w in range(8)]
    assert max(each) <= 60 / 8 + 2, each  # in turn: not one worker every second


def test_a_small_budget_goes_to_the_ranks():
    budget = StackBudget(0.02)
    reads_of = run(budget, job(8, 8), 120, 0.02)
    ranks = sum(len(reads_of[100 + r]) for r in range(8))
    workers = sum(len(v) for pid, v in reads_of.items() if pid >= 1000)
    assert ranks >= 80 and workers <= ranks / 4, (ranks, workers)


def test_a_settled_process_is_read_less_and_a_newly_still_rank_more():
    tree = [Candidate(10, RANK, 1, 0, None), Candidate(11, RANK, 1, 0, None)]
    settled = run(StackBudget(1.0), tree, 60, 0.01, still={10: SETTLED})
    assert len(settled[10]) <= len(settled[11]) / 3, settled
    budget = StackBudget(1.0)
    read: dict[int, list[float]] = {10: [], 11: []}
    for tenth in range(600):  # ticks of 0.1 s
        now = tenth / 10
        cands = [Candidate(pid, RANK, 1, 1 if pid == 10 else 0,
                           read[pid][-1] if read[pid] else None) for pid in (10, 11)]  # fmt: skip
        for pid in budget.due(now, cands):
            read[pid].append(now)
            budget.spent(0.01)
    assert len(read[10]) >= 1.8 * len(read[11]), {k: len(v) for k, v in read.items()}


def test_a_stalled_agent_goes_first():
    budget = StackBudget(0.02)
    cands = [Candidate(pid, RANK, 1, 0, None) for pid in range(10, 20)]
    cands.append(Candidate(99, RANK, 1, 0, 0.0, agent_stalled=True))
    assert budget.due(5.0, cands)[0] == 99


def test_a_budget_outside_zero_to_one_core_is_refused():
    for bad in (0, -0.1, 1.5):
        with pytest.raises(ValueError, match="stacks budget"):
            StackBudget(bad)


def test_a_read_carried_into_later_readings_counts_once():
    t = ThreadStack(1, "MainThread", True, (), "user code", None)
    once = ProcessStacks(1, MAIN, (t,), taken=1.0)
    again = ProcessStacks(2, RANK, (t,), taken=1.0)
    window = [
        StacksSample(1, 1.0, 0.0, (once, again)),
        StacksSample(1, 2.0, 0.0, (once, ProcessStacks(2, RANK, (t,), taken=2.0))),
        StacksSample(1, 3.0, 0.0, (once, ProcessStacks(2, RANK, (t,), taken=2.0))),
    ]
    assert [(s.t, p.pid) for s, p in reads(window)] == [(1.0, 1), (1.0, 2), (2.0, 2)]
    legacy = [StacksSample(1, float(i), 0.0, (ProcessStacks(1, MAIN, (t,)),)) for i in range(3)]
    assert len(list(reads(legacy))) == 3  # recordings without ``taken``: every reading a read


def test_workers_of_a_rank_that_does_not_wait_for_data_are_read_rarely():
    def workers_read(waits: bool) -> int:
        tree = [
            c if c.role != WORKER else Candidate(c.pid, c.role, c.parent, 0, None, False, waits)
            for c in job(2, 8)
        ]
        read: dict[int, list[float]] = {c.pid: [] for c in tree}
        budget = StackBudget(1.0)
        for now in range(240):
            cands = [
                Candidate(c.pid, c.role, c.parent, 0, read[c.pid][-1] if read[c.pid] else None,
                          False, c.parent_waits)
                for c in tree
            ]  # fmt: skip
            for pid in budget.due(float(now), cands):
                read[pid].append(float(now))
                budget.spent(0.015)
        return sum(len(v) for pid, v in read.items() if pid >= 1000)

    waiting, quiet = workers_read(True), workers_read(False)
    assert waiting >= 2 * 240 / WORKER_TURN - 2, waiting
    assert quiet <= waiting / QUIET_SLOWER + 2, (waiting, quiet)


def test_a_new_job_is_not_swept_worker_by_worker():
    # 64 workers never read: one per rank is due at a time, not all 64 at the budget's rate
    budget = StackBudget(1.0)
    reads_of = run(budget, job(8, 8), 10, 0.015)
    for now in range(10):
        for r in range(8):
            at_once = sum(float(now) in reads_of[1000 + r * 100 + w] for w in range(8))
            assert at_once <= 1, (now, r, at_once)


def test_a_waiting_job_with_its_agent_gets_its_workers_read_from_spare_tokens():
    """One process its agent samples (no candidate) and two workers it waits for: the turn
    alone reads them every WORKER_TURN periods; the tokens nothing else wants read them about
    every other second, within the share."""
    share, cost, seconds = 0.02, 0.02, 20
    budget = StackBudget(share)
    workers = [Candidate(200 + w, WORKER, 100, 0, None) for w in range(2)]
    reads_of = run(budget, workers, seconds, cost)
    got = sum(len(v) for v in reads_of.values())
    assert got >= 8 > seconds / WORKER_TURN + 2, got
    assert budget.used <= share * seconds + FIRST_COST_S + cost + 1e-9
    quiet = [Candidate(w.pid, WORKER, 100, 0, None, False, False) for w in workers]
    budget = StackBudget(share)
    assert sum(len(v) for v in run(budget, quiet, seconds, cost).values()) <= 2  # first reads


def test_a_launcher_is_read_rarely_and_never_taken_for_a_hang():
    budget = StackBudget(1.0)
    read: dict[int, list[float]] = {1: [], 100: []}
    for now in range(240):
        cands = [
            Candidate(1, MAIN, 0, 1, read[1][-1] if read[1] else None, launcher=True),
            Candidate(100, RANK, 1, 0, read[100][-1] if read[100] else None),
        ]
        for pid in budget.due(float(now), cands):
            read[pid].append(float(now))
            budget.spent(0.015)
    assert len(read[100]) >= 230  # the rank once a second
    assert len(read[1]) <= 240 / (WORKER_TURN * QUIET_SLOWER) + 1, read[1]  # still, yet no hurry
