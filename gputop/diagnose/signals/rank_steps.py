"""Each ranked agent's steps reduced once per reading into the windows every signal, the budget
and the causes read: its recent steps (the statistics' window) and its long window (the
window periodic side work shows in). Read from here, the same steps are never filtered or
ranked twice in one evaluation. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from gputop.model.ranks import ranked
from gputop.model.step_stats import usable
from gputop.model.steps import AgentsSample, AgentState, StepRecord

SPIKE_STEPS = 512
SPIKE_WINDOW_S = 120.0
"""Spikes are looked for over the last SPIKE_STEPS steps of the last SPIKE_WINDOW_S (at least
the statistics' own window): periodic side work (an eval every 100 steps, a checkpoint every
minute) needs a window of several periods, or its spikes enter and leave the window and the
evidence comes and goes with them."""


@dataclass(frozen=True, slots=True)
class RankSteps:
    """One agent of the job and its steps, each window taken once."""

    agent: AgentState
    recent: tuple[StepRecord, ...]
    """``usable``: the last WINDOW steps past start-up and warm-up (medians, the straggler)."""
    long: tuple[StepRecord, ...]
    """The last SPIKE_WINDOW_S of usable steps, SPIKE_STEPS at most (spikes, GC, the budget,
    the passes of periodic work)."""


def long_window(steps: tuple[StepRecord, ...] | list[StepRecord]) -> tuple[StepRecord, ...]:
    """An agent's usable steps of the last SPIKE_WINDOW_S, SPIKE_STEPS at most."""
    longer = usable(steps, window=SPIKE_STEPS)
    if not longer:
        return ()
    cut = longer[-1].t0_ns + longer[-1].dur_ns - SPIKE_WINDOW_S * 1e9
    if longer[0].t0_ns >= cut:
        return tuple(longer)  # all of it within the time (512 steps of under 0.23 s)
    return tuple(s for s in longer if s.t0_ns >= cut)


def of_agent(a: AgentState) -> RankSteps:
    return RankSteps(a, tuple(usable(a.steps)), long_window(a.steps))


def rank_steps(agents: AgentsSample | tuple[AgentState, ...] | None) -> tuple[RankSteps, ...]:
    """The ranked agents (``model.ranks.ranked``), in their order, with their windows."""
    return tuple(of_agent(a) for a in ranked(agents))
