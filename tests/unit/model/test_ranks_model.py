"""The model's one implementation of each rank metric: which agents are ranks and what they
are called (``ranked``, ``main_agent``, ``rank_labels``), each step counted once under its label
(``StepCounter``), the straggler (``rank_work``, ``compare_ranks``); and how the report's
summaries map onto the straggler definition."""

from __future__ import annotations

import pytest
from builders import agent, step

from gputop.model.ranks import (
    MIN_STEPS,
    RankRow,
    StepCounter,
    compare_ranks,
    main_agent,
    rank_labels,
    rank_work,
    ranked,
)
from gputop.model.steps import AgentsSample, StepRecord
from gputop.record.report import _straggler
from gputop.record.summary import Accumulator, merge


def steps(first: int, last: int, extra_ms: float = 0.0) -> tuple[StepRecord, ...]:
    """100 ms steps; ``extra_ms`` more work and as much less grad_sync wait."""
    ph = {"forward": 50.0 + extra_ms, "backward": 30.0, "grad_sync": 20.0 - extra_ms}
    return tuple(step(n, n * 10**8, ph) for n in range(first, last + 1))


def sample(*agents, target: int = 1) -> AgentsSample:
    return AgentsSample(target, 0.0, 0.0, agents)


# ---- which agents, and their labels ----


def test_ranked_leaves_out_a_launcher_and_main_is_rank_0():
    launcher = agent(1, ())  # torchrun loaded the agent, trains nothing
    r1, r0 = agent(11, steps(0, 5), rank=1), agent(10, steps(0, 5), rank=0)
    assert ranked(sample(launcher, r1, r0)) == [r1, r0]
    assert main_agent(sample(launcher, r1, r0)) is r0
    assert main_agent([r1]) is r1 and main_agent(None) is None
    script = agent(1, steps(0, 5))  # no rank, but steps
    assert ranked([script]) == [script] and main_agent([script]) is script


def test_rank_labels_a_script_is_rank_0_and_helpers_are_no_rank():
    script, helper = agent(1, steps(0, 3)), agent(2, steps(0, 3))
    assert rank_labels(sample(helper, script, target=1)) == {1: "0"}
    assert rank_labels(sample(helper, script, target=99)) == {2: "0"}  # first with steps
    ranks = sample(agent(10, (), rank=0), agent(11, (), rank=1), script)
    assert rank_labels(ranks) == {10: "0", 11: "1"}


def test_each_step_counted_once_under_its_label():
    counter = StepCounter()
    helper = agent(2, steps(0, 3))
    first = counter.new(sample(agent(1, steps(0, 4)), helper))
    assert [(label, a.pid, len(fresh)) for label, a, fresh in first] == [("0", 1, 5)]
    again = counter.new(sample(agent(1, steps(2, 7)), helper))
    assert [(label, [s.step for s in fresh]) for label, _, fresh in again] == [("0", [5, 6, 7])]
    assert counter.cursors[2] == (3, 3 * 10**8)  # the helper's steps are passed over for good


def test_the_minute_summaries_label_ranks_as_the_exporter_does():
    """A rank-less helper's steps were counted into rank 0 by the summaries (not by /metrics)."""
    acc = Accumulator()
    acc.agents(sample(agent(1, steps(0, 4)), agent(2, steps(0, 9)), target=1))
    assert {k: r["steps"] for k, r in acc.take()["ranks"].items()} == {"0": 5}


# ---- the straggler ----


def four(slow_extra_ms: float, main_steps: int = 20) -> list:
    out = [agent(10, steps(0, main_steps), rank=0)]
    out += [agent(10 + r, steps(0, 20, slow_extra_ms if r == 2 else 0), rank=r) for r in (1, 2, 3)]
    return out


def test_the_slowest_rank_is_the_straggler_from_10_percent_of_the_step():
    w = rank_work(four(12.0))
    assert w.straggler is not None and w.straggler.row.rank == 2
    assert w.straggler.excess_ms == pytest.approx(12.0)
    assert w.straggler.excess_of_step == pytest.approx(0.12)
    assert {r.rank: r.score for r in w.rows} == pytest.approx({0: 1, 1: 1, 2: 92 / 80, 3: 1})
    below = rank_work(four(8.0))
    assert below.slowest is not None and below.slowest.row.rank == 2 and below.straggler is None


def test_no_comparison_without_two_ranks_or_a_bar():
    one = rank_work([agent(10, steps(0, 20), rank=0)])
    assert one.slowest is None and [r.score for r in one.rows] == [1.0]
    early = rank_work(four(15.0, main_steps=MIN_STEPS - 1))  # the first step is start-up
    assert early.slowest is None and all(r.score is None for r in early.rows)
    assert len(early.rows) == 4  # the pane still shows each rank's medians


def test_an_agent_that_restarted_under_its_rank_counts_once_in_the_median():
    gone = agent(20, steps(0, 20, 30.0), rank=1, state="exited")
    w = rank_work([agent(10, steps(0, 20), rank=0), gone, agent(21, steps(0, 20), rank=1)])
    assert w.slowest is not None and w.slowest.median_work_ms == pytest.approx(80.0)
    assert w.straggler is None  # the exited process's work is not a rank's


def test_the_report_compares_median_work_from_the_summaries_or_means_in_old_files():
    def rank(r: int, work_median: float | None, work_mean: float) -> dict:
        return {"rank": r, "steps": 100, "step_s_median": 0.1, "work_s_median": work_median,
                "work_s_mean": work_mean, "work_vs_median": None}  # fmt: skip

    raw = [(str(r), {"phases": {"grad_sync": 2.0}}) for r in range(3)]
    ranks, s = _straggler(raw, [rank(0, 0.08, 0.09), rank(1, 0.08, 0.09), rank(2, 0.092, 0.2)])
    assert [r["work_vs_median"] for r in ranks] == [1.0, 1.0, 1.15]
    assert s == {"rank": 2, "work_vs_median": 1.15, "excess_of_step": 0.12}
    old = [rank(0, None, 0.08), rank(1, None, 0.08), rank(2, None, 0.09)]
    ranks, s = _straggler(raw, old)
    assert [r["work_vs_median"] for r in ranks] == [1.0, 1.0, 1.125] and s is not None


def test_merged_summaries_keep_no_work_histogram_if_a_minute_lacks_it():
    def part(work_hist: dict | None) -> dict:
        r = {"steps": 1, "seconds": 0.1, "hist": {"-116": 1}, "phases": {}, "flops": 0.0,
             "flops_s": 0.0, "samples": 0, "tokens": 0}  # fmt: skip
        if work_hist is not None:
            r["work_hist"] = work_hist
        return {"t0": 0.0, "t1": 1.0, "verdict_s": {}, "changes": [], "findings": {},
                "secondary": [], "ranks": {"0": r}, "gpus": {}, "throttle_s": {},
                "events": [], "points": {}}  # fmt: skip

    assert merge([part({"-116": 1}), part({"-116": 1})])["ranks"]["0"]["work_hist"] == {"-116": 2}
    assert merge([part(None), part({"-116": 1})])["ranks"]["0"]["work_hist"] is None


def test_compare_ranks_takes_rows_from_anywhere():
    rows = [RankRow(r, None, 10, 100.0, w, 0.0) for r, w in enumerate((80.0, 80.0, 95.0))]
    w = compare_ranks(rows, 100.0)
    assert w.straggler is not None and w.straggler.row.rank == 2
    assert compare_ranks(rows, None).slowest is None


def test_a_rank_still_in_its_first_steps_is_not_compared():
    """One rank started late (its first step compiles, loads its first batch): it is shown but
    cannot be the straggler until it has MIN_STEPS steps."""
    rows = [RankRow(0, None, 10, 100.0, 80.0, 0.0), RankRow(1, None, MIN_STEPS - 1, 300.0,
            280.0, 0.0), RankRow(2, None, 10, 100.0, 81.0, 0.0)]  # fmt: skip
    w = compare_ranks(rows, 100.0)
    assert w.straggler is None and w.slowest is not None and w.slowest.row.rank == 2
    assert len(w.rows) == 3
    settled = [*rows[:1], RankRow(1, None, MIN_STEPS, 300.0, 280.0, 0.0), rows[2]]
    assert compare_ranks(settled, 100.0).straggler.row.rank == 1
