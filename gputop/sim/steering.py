"""The simulated board steered by the job it watches: a sink, like the recorder, fed the same
readings in the same order by the session, which keeps no knowledge of the simulator.

The agents' step phases steer it while they say what the process does (busy for the compute
share); without them (a process attached by PID with no agent yet, or no step for many steps)
the main threads' stacks over the last seconds do (busy for the share of samples in forward,
backward or the optimizer), so the board is driven as a real GPU would be."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from gputop.diagnose import EvalPoint, Verdict, stack_signals, step_signals
from gputop.model.gpu import DeviceInfo, GpuSample
from gputop.model.host import HostSample
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample
from gputop.model.window import Window
from gputop.sim.scenarios import PhaseFollower
from gputop.vocab import stacks as stack_phase
from gputop.vocab import steps as step_phase

FOLLOW_S = 10.0
"""The stacks that steer the board without the agents' phases, and how long the agents' phases
keep the stacks out once they stop."""
STALLED_S = 2.0
STALLED_STEPS = 3
"""No step for max(STALLED_S, STALLED_STEPS slowest steps): the agents' shares no longer say
what the process does, and the stacks steer the board."""
STACK_WORK = (
    (step_phase.FORWARD, stack_phase.FORWARD),
    (step_phase.BACKWARD, stack_phase.BACKWARD),
    (step_phase.OPTIMIZER, stack_phase.OPTIMIZER),
)
"""(step phase, the stack phase that shows it): where a thread computes on the GPU."""


class BoardSteering:
    """A sink that steers a simulated board's ``PhaseFollower`` from the job's readings."""

    def __init__(self, follower: PhaseFollower) -> None:
        self.follower = follower
        self.problem: str | None = None
        self._names: tuple[str, ...] = ()
        """The GPUs' names, as the verdict reads the steps with them: one reduction for both."""
        self._agents_steered = -FOLLOW_S
        """When the agents' phases last steered the follower."""
        self._stacks: deque[StacksSample] = deque()
        """The stack readings of the last ``FOLLOW_S``."""

    def start(self, devices: Sequence[DeviceInfo], meta: dict[str, Any]) -> None:
        self._names = tuple(d.name for d in devices if d.name)

    def gpu(self, samples: Sequence[GpuSample]) -> None:
        pass

    def host(self, sample: HostSample) -> None:
        pass

    def agents(self, sample: AgentsSample) -> None:
        """The agents' step phases steer the board when they have them."""
        steps = step_signals(sample, self._names)
        if steps is None or not steps.shares:
            return
        since = steps.since_step_s or 0.0
        if since > max(STALLED_S, STALLED_STEPS * steps.p99_ms / 1000):
            # no step for many steps: the step shares are history, the GPU would not be
            # running them; the stacks (what the process does now) steer it instead
            self._agents_steered = -FOLLOW_S
            return
        self.follower.update(steps.shares)
        self._agents_steered = sample.t

    def stacks(self, sample: StacksSample) -> None:
        """Without the agents' phases, the main threads' stacks over the last seconds."""
        self._stacks.append(sample)
        while self._stacks and self._stacks[0].t < sample.t - FOLLOW_S:
            self._stacks.popleft()
        if sample.t - self._agents_steered < FOLLOW_S:
            return
        window = Window(tuple(self._stacks), sample.t - FOLLOW_S, sample.t)
        sig = stack_signals(window)
        if sig is not None and sig.samples:
            shares = sig.main_shares
            self.follower.update({phase: shares.get(where, 0.0) for phase, where in STACK_WORK})

    def verdict(self, point: EvalPoint, verdict: Verdict) -> None:
        pass

    def event(self, t: float, wall: float, kind: str, data: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass
