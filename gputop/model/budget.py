"""The step-time budget's types: for each rank, the window's wall time split into slices
that add up to 100% (``vocab/budget.py``), with every source that measured each slice and how
sure the shares are; the job's budget is its typical rank's. Pure data: ``diagnose/budget.py``
computes it, ``render/budget.py`` writes it as text and JSON, the verdict, panes, recordings and
exporter carry it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from gputop.model.ranks import MAIN_RANK
from gputop.vocab import budget as b

AGREE = 0.10
"""Two sources agree on a slice when their shares are this close (ten points of the step):
a stack share from 30 dumps is good to about that, and the verdict's floor is ten points."""


def standard_error(share: float, samples: int) -> float:
    """One standard error of a share of ``samples`` stack samples; a share none of them showed
    is taken as one in ``samples`` (no sample is no proof of none)."""
    seen = max(share, 1 / samples) if samples > 0 else 0.0
    return (seen * (1 - seen) / samples) ** 0.5 if 0 < seen < 1 else 0.0


def confidence(sources: int, missing: int = 0) -> float:
    """Independent agreeing sources -> confidence (a slice's, a rule's finding's); each missing
    input costs a little."""
    base = {0: 0.0, 1: 0.45, 2: 0.7}.get(sources, 0.9)
    return max(0.0, round(base - 0.05 * missing, 2))


def share_text(x: Slice) -> str:
    """A slice's share in whole percent, with its margin where that is a point or more
    ("40% ±3")."""
    margin = round(100 * x.margin)
    return f"{round(100 * x.share)}%" + (f" ±{margin}" if margin >= 1 else "")


@dataclass(frozen=True, slots=True)
class Slice:
    """One slice of the job's budget: its share of wall time and who measured it."""

    name: str
    share: float
    estimates: tuple[tuple[str, float], ...] = ()
    """(source, share) from every source that measured it: agent, stacks, NVML."""
    error: float = 0.0
    """The share's sampling error: one standard error of a share of stack samples (0 for the
    agent's clock, which times every step)."""
    corroborated: tuple[str, ...] = ()
    """Sources that do not measure the slice but whose reading holds it (a GPU idle as long as
    the losses add up to)."""
    spread: float = 0.0
    """One standard error of the share from how it moves over the window (the agent's clock:
    the spread of its batches of consecutive steps): the window measured exactly may still
    be an unusual one."""

    @property
    def low(self) -> float:
        """The share the measure vouches for: less its sampling error."""
        return max(0.0, self.share - self.error)

    @property
    def margin(self) -> float:
        """The share's whole standard error: sampling and spread together."""
        return math.hypot(self.error, self.spread)

    @property
    def interval(self) -> tuple[float, float]:
        """The share less and plus its margin, held to [0, 1]."""
        return max(0.0, self.share - self.margin), min(1.0, self.share + self.margin)

    @property
    def agree(self) -> tuple[str, ...]:
        """The sources whose own measure is within AGREE of the share, then those that hold it."""
        measured = tuple(src for src, v in self.estimates if abs(v - self.share) <= AGREE)
        return measured + tuple(c for c in self.corroborated if c not in measured)

    @property
    def confidence(self) -> float:
        """From how many sources agree on its size (``findings.confidence``)."""
        return confidence(len(self.agree))


@dataclass(frozen=True)
class RankBudget:
    """One rank's (or the main process's) budget over the window."""

    pid: int
    rank: int | None
    source: str
    """What its shares rest on: "agent" (its clock, refined by the stacks) or "stacks"."""
    shares: Mapping[str, float]
    """Every slice (``vocab.budget.SLICES``), adding up to 1."""
    seconds: float
    """Wall time the window covers."""
    steps: int = 0
    """Steps the agent timed in it (0: from the stacks)."""
    samples: int = 0
    """Stack samples its shares rest on (all of them from the stacks alone; ``errors``' of an
    agent's)."""
    estimates: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Per source, its own shares before they were combined (agreement)."""
    errors: Mapping[str, float] = field(default_factory=dict)
    """An agent rank's slices whose share the stacks' samples decided (its unmarked time split
    by them), with the share the samples vouch for taken off: their sampling error."""
    spreads: Mapping[str, float] = field(default_factory=dict)
    """An agent rank's standard error per slice from its window's batches of steps
    (``Slice.spread``)."""

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"

    @property
    def rank_key(self) -> str:
        """Its rank label in /metrics and the report (a script's main process is "0")."""
        return str(self.rank) if self.rank is not None else MAIN_RANK

    @property
    def work(self) -> float:
        """Its share doing its own work: all but waiting for others and standing still."""
        return 1.0 - self.shares[b.COMMS] - self.shares[b.STRAGGLER] - self.shares[b.STALL]


@dataclass(frozen=True)
class Budget:
    """The job's budget (its typical rank's) and every rank's."""

    slices: tuple[Slice, ...]
    """Every slice in ``SLICES`` order, adding up to 1."""
    ranks: tuple[RankBudget, ...]
    typical: RankBudget
    """The rank the job's slices are (lower median by work)."""

    def share(self, name: str) -> float:
        return next((s.share for s in self.slices if s.name == name), 0.0)

    def slice(self, name: str) -> Slice:
        return next(s for s in self.slices if s.name == name)

    @property
    def source(self) -> str:
        return self.typical.source

    def losses(self) -> list[Slice]:
        """The loss slices, largest first (ties in pipeline order)."""
        return sorted((s for s in self.slices if s.name in b.LOSSES), key=lambda s: -s.share)

    @property
    def lost(self) -> float:
        """Every loss slice together: the share of the step not spent computing."""
        return sum(s.share for s in self.slices if s.name in b.LOSSES)
