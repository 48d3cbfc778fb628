"""The model's one implementation of each rank metric: which agents are ranks and what they
are called (``ranked``, ``main_agent``, ``rank_labels``), each step counted once under its label
(``StepCounter``)."""

from __future__ import annotations

from builders import agent, step

from gputop.model.ranks import (
    StepCounter,
    main_agent,
    rank_labels,
    ranked,
)
from gputop.model.steps import AgentsSample, StepRecord
from gputop.record.summary import Accumulator


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
