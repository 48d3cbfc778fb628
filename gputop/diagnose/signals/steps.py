"""The agents' steps reduced to what the rules read: the main rank's median step and its
phase shares, spikes and what grew in them, GC, MFU, every rank's work (the straggler). Pure."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gputop.diagnose.signals.rank_steps import RankSteps, rank_steps
from gputop.model.ranks import RankWork, main_of, rank_work_of
from gputop.model.step_stats import (
    Mfu,
    data_cpu_share,
    gc_share,
    loop_share,
    mfu_of,
    phase_shares,
    tail_ms,
)
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.vocab import steps as step


@dataclass(frozen=True, slots=True)
class Spike:
    """A step over SPIKE x the median step and what made it long, read by name by side-work."""

    step: int
    ms: float
    grew: str
    """What grew most: a phase, "unmarked", or "gc" / "gc (full collections)" when garbage
    collection covers most of the excess."""


@dataclass(frozen=True, kw_only=True)
class StepSignals:
    """The main rank's recent steps (and every rank's work time) as the rules read them."""

    ranks: int
    steps: int
    median_ms: float = 0
    cv: float = 0
    shares: dict[str, float] = field(default_factory=dict)
    spikes: tuple[Spike, ...] = ()
    open_phase: str | None
    open_age_s: float | None
    since_step_s: float | None
    fingerprint: Mapping[str, object]
    mfu: float | None = None
    agents: tuple[AgentState, ...] = field(default_factory=tuple)
    per_rank: tuple[RankSteps, ...] = ()
    """Every ranked agent with its windows, taken once per reading (``rank_steps``): what the
    budget and the causes read, never the agents' raw steps again."""
    mfu_detail: Mfu | None = None
    """MFU with the precision and peak it was computed against, or why it was not."""
    gc_share: float | None = None
    """Share of step time in Python garbage collection (None: the agent did not time it), over
    the spike window (``spike_steps``): full collections come every few hundred steps, so the
    median's window would mostly miss the ones the spikes are made of."""
    gc_full: int = 0
    """Full (generation 2) collections in those steps."""
    data_cpu: float | None = None
    """The share of the training thread's batch waits it computed in (``data_cpu_share``;
    None: the agent did not time it)."""
    rank_work: RankWork | None = None
    """Per-rank work and sync wait and the slowest rank: the straggler definition (model)."""
    p99_ms: float = 0
    """The 99th percentile step (of the steps the agent keeps, about the slowest): the job's
    own longest normal step, which a hang is judged against."""
    spike_steps: int = 0
    """Steps the spikes were looked for in (``RankSteps.long``; 0: ``steps``)."""
    spike_median_ms: float = 0
    """The median step of those (0: ``median_ms``)."""
    loop_share: float = 0.0
    """The typical step's share outside the phases the agent marks (``step_stats.loop_share``):
    the loop's own Python between batches, such as per-step metrics and logging."""

    def of(self, pid: int) -> RankSteps | None:
        """The agent ``pid`` with its windows, None when it is not one of the job's ranks."""
        return next((r for r in self.per_rank if r.agent.pid == pid), None)


SPIKE = 1.5
"""A step longer than this many median steps is a spike."""
GC_OF_EXCESS = 0.5
"""A spike whose excess over the median step is at least this much more GC than a typical
step's is a GC spike: a collection pauses whatever phase it lands in, so that phase grows too."""


def _spikes(steps: Sequence[StepRecord], median_ns: float) -> tuple[Spike, ...]:
    """Each spike with what grew most: "gc" or "gc (full collections)" when the step's extra
    GC time covers most of its excess, else the phase that grew most ("unmarked" included)."""

    def parts(s: StepRecord) -> dict[str, float]:
        d: dict[str, float] = dict(s.phases)
        d["unmarked"] = s.unaccounted_ns
        return d

    every = [parts(s) for s in steps]
    names = {k for p in every for k in p}
    # a phase missing from a step took 0 ns there: a checkpoint phase seen only in the spikes
    # has a typical time of 0, not the spikes' own
    med = {k: statistics.median(p.get(k, 0) for p in every) for k in names}
    gc_med = statistics.median(s.gc_ns or 0 for s in steps) if steps else 0
    out = []
    for s in steps:
        if s.dur_ns > SPIKE * median_ns:
            excess = s.dur_ns - median_ns
            if s.gc_ns is not None and s.gc_ns - gc_med >= GC_OF_EXCESS * excess:
                gc = "gc (full collections)" if s.gc_full else "gc"
                out.append(Spike(s.step, s.dur_ns / 1e6, gc))
                continue
            grew, _ = max(parts(s).items(), key=lambda kv: kv[1] - med.get(kv[0], 0.0))
            out.append(Spike(s.step, s.dur_ns / 1e6, grew))
    return tuple(out)


def _spike_window(rank: RankSteps) -> tuple[StepRecord, ...]:
    return rank.long if len(rank.long) > len(rank.recent) else rank.recent


_LAST_STEPS: list[tuple[AgentsSample, tuple[str, ...], StepSignals | None]] = []
"""The last reading's step signals, kept with the very reading they came from (an identity
check): the verdict runs after every reading of any source, the agents' reading changes once
a second, and its spikes and per-rank medians walk up to 512 steps per rank."""


def step_signals(agents: AgentsSample | None, gpu_names: Sequence[str] = ()) -> StepSignals | None:
    """The agents' reading reduced (``_step_signals``), once per reading."""
    if agents is None:
        return None
    names = tuple(gpu_names)
    if _LAST_STEPS and _LAST_STEPS[0][0] is agents and _LAST_STEPS[0][1] == names:
        return _LAST_STEPS[0][2]
    out = _step_signals(agents, names)
    _LAST_STEPS[:] = [(agents, names, out)]
    return out


def _step_signals(agents: AgentsSample, gpu_names: Sequence[str]) -> StepSignals | None:
    per = rank_steps(agents)
    ranked_agents = tuple(r.agent for r in per)
    main_rank = main_of(per, lambda r: r.agent)
    if main_rank is None:
        return None
    main = main_rank.agent
    steps = main_rank.recent
    if len(steps) < 3:
        return StepSignals(  # too few steps for statistics: who is there and where it is
            ranks=len(per),
            steps=len(steps),
            open_phase=main.open_phase,
            open_age_s=main.open_age_s,
            since_step_s=main.since_step_s,
            fingerprint=main.fingerprint,
            agents=ranked_agents,
            per_rank=per,
        )
    durs = sorted(s.dur_ns for s in steps)
    med = statistics.median(durs)
    mean = statistics.fmean(durs)
    cv = statistics.pstdev(durs) / mean if mean else 0.0
    longer = _spike_window(main_rank)
    long_med = statistics.median(s.dur_ns for s in longer) if longer is not steps else med
    work = rank_work_of([(r.agent, r.recent) for r in per])
    mfu = mfu_of(steps, gpu_names, main.fingerprint)
    gc, gc_full = gc_share(longer)
    return StepSignals(
        ranks=len(per),
        steps=len(steps),
        median_ms=med / 1e6,
        cv=cv,
        shares=dict(phase_shares(steps)),
        spikes=_spikes(longer, long_med),
        open_phase=main.open_phase,
        open_age_s=main.open_age_s,
        since_step_s=main.since_step_s,
        fingerprint=main.fingerprint,
        mfu=mfu.value,
        mfu_detail=mfu,
        agents=ranked_agents,
        per_rank=per,
        gc_share=gc,
        gc_full=gc_full,
        data_cpu=data_cpu_share(steps),
        rank_work=work,
        p99_ms=tail_ms(durs, 0.99),
        spike_steps=len(longer),
        spike_median_ms=long_med / 1e6,
        loop_share=loop_share(steps, (step.OTHER,)),
    )
