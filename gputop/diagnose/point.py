"""One evaluation of the verdict over a Timeline, shared by the TUI, the headless loop and
replay. The point says exactly which window ends were used, so a recording that keeps the
points and the samples recomputes the same verdicts (hysteresis included: it counts
evaluations, so replay must evaluate at the same points in the same order)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputop.diagnose.findings import Verdict
from gputop.diagnose.signals.inputs import RuleInputs, reduce_windows
from gputop.diagnose.verdict import State, evaluate
from gputop.model import DeviceInfo, SeriesKey, Timeline
from gputop.model.steps import AgentsSample

WINDOW_S = 30.0
"""GPU and host history the rules read."""
STACKS_WINDOW_S = 60.0
"""Stack samples come once a second per process at most: a longer window for their shares."""


@dataclass(frozen=True, slots=True)
class EvalPoint:
    """Where a verdict was evaluated: the window ends it read, kept so that a recording
    recomputes the same verdict."""

    now: float
    """The verdict's clock and the GPU windows' end (monotonic seconds)."""
    host: tuple[SeriesKey, float] | None = None
    """(series key, window end) of the host samples, None without a host source."""
    stacks: tuple[SeriesKey, float] | None = None
    """(series key, window end) of the stack samples, None without py-spy."""


def evaluate_at(
    timeline: Timeline,
    devices: Sequence[DeviceInfo],
    point: EvalPoint,
    agents: AgentsSample | None,
    state: State,
) -> tuple[Verdict, State, RuleInputs]:
    """The verdict at ``point`` from the timeline and the agents' latest reading."""
    gpus = [timeline.window(("gpu", d.index), point.now, WINDOW_S) for d in devices]
    host = stacks = None
    if point.host is not None:
        host = timeline.window(point.host[0], point.host[1], WINDOW_S)
    if point.stacks is not None:
        key, end = point.stacks
        stacks = timeline.window(key, end, STACKS_WINDOW_S)
    sig = reduce_windows(gpus, devices, host=host, agents=agents, stacks=stacks)
    verdict, state = evaluate(sig, point.now, state)
    return verdict, state, sig
