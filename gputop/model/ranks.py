"""Ranks: which agents are ranks, what each is called, its steps counted once, and the
straggler. One implementation of each, read by the verdict, the panes, /metrics and the
report (they used to compute these their own ways and could disagree). Pure.

The straggler (docs/facts/bounds.md, "straggler"): a rank's *work* time (step minus the time it
waited in gradient sync) exceeds the typical rank's by at least ``STRAGGLER_EXCESS`` of the
median step, for most of the recent steps. Each rank's work is the median over its recent steps
(``usable``); the typical rank's (``typical``: the lower median over ranks) is the baseline.
"For most of the steps" is what the median says: a rank's median work is over a bar exactly
when at least half of its steps are. The
rank named is the one with the most work: in synchronous data parallelism the collectives make
every rank's step equally long, so it is also the rank that waits least in sync (it arrives
last), the culprit.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from gputop.model.step_stats import usable, work_ns
from gputop.model.steps import AgentsSample, AgentState, StepCursor, StepRecord, new_steps
from gputop.vocab.steps import GRAD_SYNC

T = TypeVar("T")

STRAGGLER_EXCESS = 0.1
"""The slowest rank's work over the median rank's, as a share of the median step, from which
it is the straggler (docs/facts/bounds.md, "straggler")."""

MIN_STEPS = 3
"""Usable steps the main rank needs before ranks are compared (its median step is the bar)."""

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
    return main_of(ranked(agents), lambda a: a)


def main_of(candidates: Sequence[T], agent: Callable[[T], AgentState]) -> T | None:
    """``main_agent`` among items already ranked, each holding its ``agent``."""
    return next(
        (c for c in candidates if agent(c).rank in (0, None)), candidates[0] if candidates else None
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


# ---- the straggler ----


@dataclass(frozen=True, slots=True)
class RankRow:
    """One rank reduced to what the straggler definition compares (a row of the ranks pane)."""

    rank: int | None
    pid: int | None
    """None where only a summary is left (the report)."""
    steps: int
    step_ms: float
    work_ms: float
    """Step minus gradient-sync wait: what the rank itself had to do."""
    sync_ms: float
    score: float | None = None
    """work_ms over the median rank's (1.0 typical, 1.3: 30% more work); None without a bar."""

    @property
    def name(self) -> int:
        """What a person calls it: its rank, or the pid of an agent that gave none."""
        return self.rank if self.rank is not None else (self.pid or 0)


@dataclass(frozen=True, slots=True)
class Slowest:
    """The rank with the most work against the median rank, and whether that is a straggler."""

    row: RankRow
    median_work_ms: float
    step_ms: float
    """The bar's unit: the main rank's median step."""

    @property
    def excess_ms(self) -> float:
        return self.row.work_ms - self.median_work_ms

    @property
    def excess_of_step(self) -> float:
        """The excess as a share of the median step (0 without a step time)."""
        return self.excess_ms / self.step_ms if self.step_ms else 0

    def exceeds(self, share: float) -> bool:
        """Its excess is at least ``share`` of the median step (the straggler bar, or the
        verdict's band of it while straggler is shown)."""
        return self.excess_ms >= share * self.step_ms

    @property
    def straggler(self) -> bool:
        return self.exceeds(STRAGGLER_EXCESS)


@dataclass(frozen=True, slots=True)
class RankWork:
    """Every rank's work and sync wait, with scores and the slowest rank: the one straggler
    definition the rule, the ranks pane, /metrics and the report read."""

    rows: tuple[RankRow, ...]
    slowest: Slowest | None
    """None with fewer than two ranks to compare or no bar yet."""

    @property
    def straggler(self) -> Slowest | None:
        """The slowest rank when it is a straggler by the definition."""
        return self.slowest if self.slowest is not None and self.slowest.straggler else None

    def row(self, pid: int) -> RankRow | None:
        return next((r for r in self.rows if r.pid == pid), None)


def typical(items: Iterable[T], key: Callable[[T], Any]) -> T:
    """The typical one of several ranks (or nodes, or their work times): the lower median by
    ``key``, one of them rather than an average of two, so with one straggler among eight it is
    a rank that waits for it, and of two the one that waits. The one definition the budget, the
    straggler's bar, the ranks pane and the fleet read."""
    by_key = sorted(items, key=key)
    if not by_key:
        raise ValueError("no items to take the typical one of")
    return by_key[(len(by_key) - 1) // 2]


def compare_ranks(rows: Sequence[RankRow], step_ms: float | None) -> RankWork:
    """Scores and the slowest rank from per-rank work times and the median step (None: no bar
    yet, nothing compared). Rows with the same name (an agent that restarted under its rank)
    count once in the median, the last one; rows with fewer than MIN_STEPS steps are scored
    but not compared."""
    settled = [r for r in rows if r.steps >= MIN_STEPS]
    if step_ms is None or not settled:
        return RankWork(tuple(rows), None)
    # a rank with fewer than MIN_STEPS steps is still starting (its first step compiles, loads
    # its first batch): it is shown, but not compared, so it cannot be the straggler yet
    by_name = {r.name: r for r in settled}
    median = typical(by_name.values(), key=lambda r: r.work_ms).work_ms
    scored = tuple(replace(r, score=r.work_ms / median if median > 0 else None) for r in rows)
    compared = {r.name: r for r in scored if r.steps >= MIN_STEPS}
    slowest = None
    if len(compared) >= 2:
        slowest = Slowest(max(compared.values(), key=lambda r: r.work_ms), median, step_ms)
    return RankWork(scored, slowest)


def rank_work(agents: AgentsSample | Iterable[AgentState] | None) -> RankWork:
    """The straggler definition over the agents' recent steps (``usable``)."""
    return rank_work_of([(a, usable(a.steps)) for a in ranked(agents)])


def rank_work_of(ranks: Sequence[tuple[AgentState, Sequence[StepRecord]]]) -> RankWork:
    """The straggler definition over ranked agents with their recent steps: per rank the
    medians of step, work and sync wait; the bar from the main rank's median step."""
    rows = []
    for a, st in ranks:
        if st:
            rows.append(
                RankRow(
                    a.rank,
                    a.pid,
                    len(st),
                    statistics.median([s.dur_ns for s in st]) / 1e6,
                    statistics.median([work_ns(s) for s in st]) / 1e6,
                    statistics.median([s.phases.get(GRAD_SYNC, 0) for s in st]) / 1e6,
                )
            )
    main = main_of([a for a, _ in ranks], lambda a: a)
    bar = next((r for r in rows if main is not None and r.pid == main.pid), None)
    return compare_ranks(rows, bar.step_ms if bar and bar.steps >= MIN_STEPS else None)
