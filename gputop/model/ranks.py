"""Ranks: which agents are ranks, what each is called, and its steps counted once. One
implementation of each, read by the verdict, the panes, /metrics and the report (they used to
compute these their own ways and could disagree). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from gputop.model.steps import AgentsSample, AgentState, StepCursor, StepRecord, new_steps

MAIN_RANK = "0"
"""The rank label of a job without ranks (a plain script): its main process."""


# ---- which agents, and what they are called ----


def _agents(agents: AgentsSample | Iterable[AgentState] | None) -> Iterable[AgentState]:
    if agents is None:
        return ()
    return agents.agents if isinstance(agents, AgentsSample) else agents


def ranked(agents: AgentsSample | Iterable[AgentState] | None) -> list[AgentState]:
    """Agents that are training ranks or report steps: not a launcher (torchrun) that loaded
    the agent but trains nothing."""
    return [a for a in _agents(agents) if a.rank is not None or len(a.steps) > 1]


def main_agent(agents: AgentsSample | Iterable[AgentState] | None) -> AgentState | None:
    """The agent whose steps stand for the job: rank 0 (or the one without a rank), else the
    first ranked one."""
    candidates = ranked(agents)
    return next(
        (a for a in candidates if a.rank in (0, None)), candidates[0] if candidates else None
    )


def rank_labels(sample: AgentsSample) -> dict[int, str]:
    """pid -> rank label. Ranked agents by their rank; one process without a rank (a plain
    script: the target itself, or else the first such agent with steps) is rank "0" when no
    agent claims rank 0. Other rank-less processes (helpers that loaded the agent too) have
    no label: their steps are not a rank's."""
    out = {a.pid: str(a.rank) for a in sample.agents if a.rank is not None}
    if MAIN_RANK in out.values():
        return out
    rankless = [a for a in sample.agents if a.rank is None]
    main = next((a for a in rankless if a.pid == sample.target), None)
    main = main or next((a for a in rankless if a.steps), None)
    if main is not None:
        out[main.pid] = MAIN_RANK
    return out


# ---- steps counted once per rank ----


@dataclass
class RankTotals:
    """Sums over one rank's counted steps: the report's minute summaries and the exporter's
    counters add up the same things the same way."""

    steps: int = 0
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds per phase (as named, or as ``add`` was told to name them); "unmarked" is the
    step time no phase covered."""
    samples: int | None = None
    """None until a step reports samples (likewise tokens)."""
    tokens: int | None = None
    flops: float = 0.0
    flops_s: float = 0.0
    """Step time of the steps that reported FLOPs (MFU's denominator)."""

    def add(self, s: StepRecord, phase: Callable[[str], str] | None = None) -> None:
        """Count one step; ``phase`` maps the agent's phase names to the ones kept (the
        exporter's bounded label set), all kept as named without it."""
        seconds = s.dur_ns / 1e9
        self.steps += 1
        self.seconds += seconds
        for name, ns in s.phases.items():
            key = phase(name) if phase is not None else name
            self.phases[key] = self.phases.get(key, 0.0) + ns / 1e9
        if s.unaccounted_ns:
            self.phases["unmarked"] = self.phases.get("unmarked", 0.0) + s.unaccounted_ns / 1e9
        if s.flops:
            self.flops += s.flops
            self.flops_s += seconds
        if s.samples is not None:
            self.samples = (self.samples or 0) + s.samples
        if s.tokens is not None:
            self.tokens = (self.tokens or 0) + s.tokens


class StepCounter:
    """Each step of each agent counted once, under its rank label (``rank_labels``), across
    readings that repeat hundreds of steps: the one per-rank step accounting."""

    def __init__(self, cursors: Mapping[int, StepCursor] | None = None) -> None:
        self.cursors: dict[int, StepCursor] = dict(cursors or {})
        """pid -> the last step counted from that agent (``new_steps``)."""

    def new(
        self, sample: AgentsSample, labels: Mapping[int, str] | None = None
    ) -> list[tuple[str, AgentState, tuple[StepRecord, ...]]]:
        """(rank label, agent, its steps not counted before) per labelled agent. Every agent's
        cursor moves on, so a step seen while its agent had no label is never counted."""
        labels = rank_labels(sample) if labels is None else labels
        out = []
        for a in sample.agents:
            fresh, cursor = new_steps(a.steps, self.cursors.get(a.pid))
            if cursor is not None:
                self.cursors[a.pid] = cursor
            label = labels.get(a.pid)
            if label is not None:
                out.append((label, a, fresh))
        return out
