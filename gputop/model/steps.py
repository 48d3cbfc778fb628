"""What the in-process agents report: steps split into phases, per rank."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gputop.vocab.steps import STEP_PHASES

_EMPTY: Mapping[str, Any] = MappingProxyType({})

PIPELINE = STEP_PHASES
"""Pipeline order for display: the agent's own list (``gputop.vocab.steps``)."""


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One finished training step as an agent timed it: what the step, phase, spike and MFU
    statistics are computed from."""

    step: int
    t0_ns: int
    dur_ns: int
    phases: Mapping[str, int]
    """Host nanoseconds per phase within the step (custom names included)."""
    gpu: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    """GPU nanoseconds per phase, from CUDA events, when they have resolved."""
    samples: int | None = None
    tokens: int | None = None
    flops: float | None = None
    inputs: int | None = None
    """Tensor elements the step's training forwards were given (None: the agent saw none, or
    an older agent): ranks given more work longer."""
    comm_bytes: int | None = None
    """Bytes the step's collectives were given (None: no collective, or an older agent)."""
    comm_ns: int | None = None
    """Nanoseconds the step had a collective outstanding (issue to completion as the host
    sees it, overlapping calls once; None: none, or an older agent): against the step's wait
    for them, the part hidden behind compute."""
    data_cpu_ns: int | None = None
    """CPU nanoseconds the training thread used while it waited for the step's batch (None: no
    wait timed, or an older agent): with no DataLoader workers, computing it or asleep on a
    read."""
    gc_ns: int | None = None
    """Nanoseconds the step spent in Python garbage collections (inside its phases: a
    collection pauses whatever runs); None when the agent did not time them."""
    gc_full: int | None = None
    """Full (generation 2) collections within the step, the ones that traverse the whole heap."""
    comm_by: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: _EMPTY)
    """Per caller of the step's collectives (DDP, FSDP, ZeroRedundancyOptimizer, DeepSpeed, a
    framework, or the job's own "file.py:function"): (bytes, nanoseconds outstanding, calls);
    empty: none, or an older agent."""

    @property
    def unaccounted_ns(self) -> int:
        return max(0, self.dur_ns - sum(self.phases.values()))


@dataclass(frozen=True, slots=True)
class AgentState:
    """One agent (a process of the job running gputop.agent) as the monitor last heard it: its
    rank, settings, recent steps and the phase it is in now."""

    pid: int
    state: str
    """connected, reconnecting (the socket went away, it may come back) or exited."""
    rank: int | None
    local_rank: int | None
    world_size: int | None
    hostname: str | None
    argv: tuple[str, ...]
    fingerprint: Mapping[str, object]
    steps: tuple[StepRecord, ...]
    open_phase: str | None
    open_age_s: float | None
    since_step_s: float | None
    heartbeat_age_s: float | None
    agent_errors: int
    dropped: int
    """Lines or items from this agent that were malformed and ignored."""
    cwd: str | None = None
    """The process's working directory when its agent started (None: an older agent): where
    a relative script in ``argv`` is (``model/job_key.py``)."""


@dataclass(frozen=True, slots=True)
class AgentsSample:
    """Every agent found in the target's tree at one reading: the agents' source."""

    target: int
    t: float
    wall: float
    agents: tuple[AgentState, ...]
    problems: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        return ("agents", self.target)


StepCursor = tuple[int, int]
"""(step number, t0_ns) of the last step counted from one agent."""


def new_steps(
    steps: tuple[StepRecord, ...], cursor: StepCursor | None
) -> tuple[tuple[StepRecord, ...], StepCursor | None]:
    """The steps of a reading not counted before, and the cursor after them. Readings repeat
    the agent's last hundreds of steps; a step is new when its number is past the cursor's or
    it started after it (an agent that restarted numbers from 0 again). Looks from the end:
    only the few new steps are touched."""
    first = len(steps)
    while first > 0 and (
        cursor is None or steps[first - 1].step > cursor[0] or steps[first - 1].t0_ns > cursor[1]
    ):
        first -= 1
    fresh = steps[first:]
    return fresh, ((fresh[-1].step, fresh[-1].t0_ns) if fresh else cursor)
