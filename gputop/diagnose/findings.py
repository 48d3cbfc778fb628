"""What a rule returns: a finding with its evidence, confidence and levers. Pure data."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputop.model.budget import Budget
from gputop.vocab.budget import JSON_DECIMALS

NO_PROGRESS = "no progress for"
"""How the note starts while the job stands still but not yet for its hang limit."""
STALLED = "stalled"
"""The timeline's label for such a verdict."""
WARMING_UP = "warming up"
"""How the note of a verdict with no principal starts while the job is still starting
(``rules.warming_up``): the timeline, the verdict pane and /metrics show it as such."""


@dataclass(frozen=True)
class Evidence:
    """One number, the threshold it crossed (or not), and where it came from."""

    text: str
    source: str
    """NVML, host, stacks or agent."""
    supports: bool = True
    """False: a number that speaks against the finding (shown, not hidden)."""


@dataclass(frozen=True)
class Cause:
    """Why the principal's slice is what it is for this job, found from measurements (which
    rank, and what differs about it; what a blocked frame waits for and who holds it): the
    verdict's second line."""

    text: str
    """One line: "rank 1's inputs are 2.0x the others' (...)"."""
    evidence: tuple[Evidence, ...] = ()
    levers: tuple[str, ...] = ()
    """The levers that fit this cause, cheapest first: they come before the bound's own."""


@dataclass(frozen=True)
class Saving:
    """What a lever would save, estimated from this job's budget and numbers: a share of the
    step, with the least and most it may be."""

    share: float
    """0..1 of the typical rank's step."""
    speedup: float
    """Steps per second after over before (``speedup_of``: the step shrinks by ``share``)."""
    condition: str
    """What the estimate assumes: "if rank 1 matched the others"."""
    low: float = 0.0
    """The least share it may save (the spread of what it rests on: the slice's sampling
    error, the numbers the cause sized it from)."""
    high: float = 0.0
    """The most."""

    def __post_init__(self) -> None:
        # the shares to the decimals JSON keeps: "saves 9-16%" said from this object and from
        # diagnose's JSON or a report (which read these back) alike, never rounded twice
        for name in ("share", "low", "high"):
            object.__setattr__(self, name, round(getattr(self, name), JSON_DECIMALS))

    @property
    def text(self) -> str:
        return saving_text(self.speedup, self.condition, self.low, self.high)


def saving_text(speedup: float, condition: str, low: float = 0.0, high: float = 0.0) -> str:
    """How every output says a saving (a ``Saving``, or one read back from JSON): the speed-up
    and, where known, the range of the step it takes away."""
    lo, hi = round(100 * low), round(100 * high)
    span = (
        ""
        if hi <= 0
        else f" (saves {hi}% of a step)"
        if lo == hi
        else f" (saves {lo}-{hi}% of a step)"
    )
    return f"~{speedup:.2g}x steps/s{span} {condition}"


def speedup_of(share: float) -> float:
    """Steps per second after a step shrinks by ``share`` of itself, over before."""
    return round(1.0 / max(0.05, 1.0 - share), 2)


@dataclass(frozen=True)
class Finding:
    """One rule's conclusion about its bound, fired or not, with what it rests on."""

    bound: str
    fired: bool
    confidence: float
    """0..1: how sure, from how many independent sources agree."""
    summary: str
    evidence: tuple[Evidence, ...] = ()
    levers: tuple[str, ...] = ()
    """Cheapest first, naming the user's own settings where known; each a ``Lever`` (a text
    that declares the slice it saves from and the setups it fits) until recorded."""
    missing: tuple[str, ...] = ()
    """Inputs this rule would have used but did not have."""
    impact: float = 0.0
    """Rough share of step time at stake (0..1), used to rank findings."""
    explains: tuple[str, ...] = ()
    """Bounds this finding is the cause of when it fires (ranked after it, kept as secondary)."""
    cause: Cause | None = None
    """Why, for this job (``diagnose/causes/``), on every finding the verdict shows (the
    principal and the secondary ones); None where none was measured, and on the rules' own
    findings (``Verdict.findings``)."""
    saving: Saving | None = None
    """What the principal's first lever would save (``diagnose/saving.py``)."""
    lever_savings: tuple[Saving | None, ...] = ()
    """What each lever would save, in the levers' order (None: advice, or a slice the budget
    cannot size); on the findings the verdict shows."""


@dataclass(frozen=True)
class Verdict:
    """Every rule's finding ranked into one principal bound and the secondary ones."""

    principal: Finding | None
    secondary: tuple[Finding, ...]
    findings: tuple[Finding, ...]
    """Every rule's finding, fired or not (the full reasoning)."""
    since: float | None
    """When the principal bound started to hold (monotonic seconds)."""
    note: str = ""
    """"not enough data yet: ..." and similar."""
    inputs: tuple[str, ...] = field(default_factory=tuple)
    """Which inputs were available: NVML, host, stacks, agent."""
    budget: Budget | None = None
    """Where the step's time goes (``model/budget.py``, computed by ``diagnose/budget.py``):
    the principal is its largest loss; every output shows these shares."""
    risks: tuple[str, ...] = ()
    """What does not cost time yet but may end the job (``diagnose/risks.py``), one line
    each, whatever the principal."""

    @property
    def warming_up(self) -> bool:
        """No principal because the job is still starting (the note says how far it is)."""
        return self.principal is None and self.note.startswith(WARMING_UP)

    @property
    def stalled(self) -> bool:
        """No principal yet, but the job has stopped moving (``rules.stalling``): a hang is
        called if it lasts."""
        return self.principal is None and self.note.startswith(NO_PROGRESS)

    @property
    def label(self) -> str | None:
        """What a timeline shows: the principal bound, "warming up", "stalled", or None."""
        if self.principal:
            return self.principal.bound
        return WARMING_UP if self.warming_up else STALLED if self.stalled else None
