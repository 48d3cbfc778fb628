"""The live session: the one place where readings become history, verdicts and outputs.

Every mode of gputop is a view of a ``Session``. The TUI's sampler threads post readings to
the UI thread, which hands them to the session and draws the state it returns; `gputop
diagnose` and `gputop record` drive it from a loop on one thread; replay drives it from a
recording on a playback clock (readings in their recorded order, verdicts evaluated at the
recorded points). What the session does with a reading is written once, here:

1. append it to the Timeline and keep it as the latest of its source;
2. hand it to the sinks (recorder, exporter, a simulated board's steering) in the order taken;
3. evaluate the verdict at the point the readings define (``evaluate_each``), carry the
   hysteresis, and hand the evaluation to the sinks;
4. publish an immutable ``SessionState`` that every output reads.

No Textual, no threads and no I/O of its own: sinks do their own I/O, and the clock that
stamps events is injected. Like the Timeline, a Session has one writer.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from types import MappingProxyType
from typing import Any

from gputop.diagnose import (
    STACKS_WINDOW_S,
    BudgetBins,
    Change,
    Comparison,
    EvalPoint,
    Interval,
    Remembered,
    RuleInputs,
    RunSummary,
    State,
    Verdict,
    evaluate_at,
)
from gputop.followed_run import Called, FollowedRun, JobMemory, shift_event
from gputop.model import DeviceInfo, GpuSample, Timeline
from gputop.model.host import HostSample
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample
from gputop.sinks import Sinks

EVALUATE_GAP_S = 1.0
"""A live screen evaluates the verdict at most this often (``Session.min_gap_s``): the readings
come from four sources at their own rates, and one evaluation of an 8-rank job's windows costs
milliseconds; a reading in between is folded into the next one (``settle``)."""
EVALUATE_SHARE = 0.005
"""A live session's evaluations use at most this share of one core on average
(``Session.evaluate_share``): an evaluation waits for its own CPU cost over this share since the
last one. Measured: one trainer on a 2-GPU board costs 1 ms with empty windows and 5-8 ms once
they fill (every ~1.3 s instead of every round); an 8-rank job's ~10 ms (every ~2 s instead of
adding 1% of a core to the node it watches)."""
COSTS_KEPT = 5
"""The evaluations whose median cost sets the gap: one slow one (a garbage collection) does not
stretch it."""
READINGS = ("gpu", "host", "agents", "stacks")
"""The kinds of reading a session takes, in the order the sinks and recordings name them."""


@dataclass(frozen=True)
class SessionState:
    """What every output reads: the latest readings and the verdict at one moment.

    Immutable: the history it answers from ends at its own readings, so readings taken
    later do not change what it says (the Timeline is shared, and only appended to)."""

    devices: tuple[DeviceInfo, ...]
    gpus: Mapping[int, GpuSample]
    """The latest reading of each GPU, by index."""
    host: HostSample | None
    agents: AgentsSample | None
    stacks: StacksSample | None
    verdict: Verdict | None
    """The verdict as shown (in replay: the recorded one)."""
    point: EvalPoint | None
    """Where the verdict was evaluated (None before the first evaluation)."""
    inputs: RuleInputs | None
    """The reduced numbers the rules read at that point (MFU, step statistics)."""
    evaluations: int
    problems: tuple[str, ...]
    """Outputs that stopped on the way (a full disk, a port taken), one line each."""
    timeline: Timeline = field(repr=False, compare=False)
    intervals: tuple[Interval, ...] = field(default=(), repr=False, compare=False)
    """The budget over time: the closed intervals, oldest first (``diagnose/budget_bins.py``);
    the same tuple until another interval closes, so a pane can tell by identity."""
    shifts: tuple[Called, ...] = ()
    """Shifts of a rank's step time inside the run, oldest first, each with its rank's label
    and the session time it was called (the reading that brought the steps past it)."""
    run: RunSummary | None = None
    """This run's pace so far (the main agent's steps), as of the last evaluation."""
    comparison: Comparison | None = None
    """This run against the job's last one (its memory), as of the last evaluation."""
    shift_change: Change | None = None
    """The latest shift's rank since it against before it, as of the last evaluation."""

    @property
    def verdict_now(self) -> float:
        """The verdict's clock (monotonic seconds): its age is measured from here."""
        return self.point.now if self.point is not None else 0.0

    def gpu_history(self, index: int, seconds: float) -> tuple[GpuSample, ...]:
        """The readings of one GPU over ``seconds`` up to its latest one."""
        latest = self.gpus.get(index)
        if latest is None:
            return ()
        return self.timeline.window(("gpu", index), latest.t, seconds).samples

    def stacks_window(self, seconds: float = STACKS_WINDOW_S) -> tuple[StacksSample, ...]:
        """The stack readings the verdict and the stacks pane look at."""
        if self.stacks is None:
            return ()
        return self.timeline.window(self.stacks.key, self.stacks.t, seconds).samples

    @property
    def walls(self) -> list[float]:
        """Wall-clock times of the latest GPU readings (the header's clock); without GPUs, of
        the latest readings of the other sources."""
        if self.gpus:
            return [s.wall for s in self.gpus.values()]
        return [r.wall for r in (self.host, self.agents, self.stacks) if r is not None]


Shown = Callable[[Verdict], Verdict]
"""Turns the verdict just computed into the one to show (replay shows the recorded one)."""


class Session:
    """One live session: readings in, history, verdicts and outputs out (module docstring)."""

    def __init__(
        self,
        devices: Sequence[DeviceInfo],
        *,
        sinks: Sinks | None = None,
        evaluate_each: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        cpu: Callable[[], float] = time.thread_time,
        memory: JobMemory | None = None,
        run_id: str = "",
        baseline: Remembered | None = None,
    ) -> None:
        """``cpu``: the evaluating thread's CPU seconds (what ``evaluate_share`` bounds);
        ``memory``: the jobs' memory, this run kept there as ``run_id``; ``baseline``: the run
        this one is compared with (``diagnose --baseline FILE``), else the job's last in
        ``memory``."""
        self.devices = tuple(devices)
        self.sinks = sinks if sinks is not None else Sinks()
        self.evaluate_each = evaluate_each
        """Evaluate after every reading (live); replay evaluates at the recorded points only."""
        self.min_gap_s = 0.0
        """Seconds (of ``clock``) an evaluation after a reading waits for since the last one;
        the readings in between are evaluated by the next reading after it, or ``settle``."""
        self.evaluate_share: float | None = None
        """At most this share of one core for evaluations (``EVALUATE_SHARE``): the gap
        between two grows with their CPU cost. None: no bound (replay, tests)."""
        self._costs: deque[float] = deque(maxlen=COSTS_KEPT)
        """The last evaluations' CPU seconds (this thread's)."""
        self._evaluated_at: float | None = None
        self._unevaluated = False
        self._news = False
        """A reading that must be evaluated at once (the target exited)."""
        self._clock = clock
        self._wall = wall
        self._cpu = cpu
        self.timeline = Timeline()
        self._gpus: dict[int, GpuSample] = {}
        self._host: HostSample | None = None
        self._agents: AgentsSample | None = None
        self._stacks: StacksSample | None = None
        self._hysteresis = State()
        self._verdict: Verdict | None = None
        self._point: EvalPoint | None = None
        self._inputs: RuleInputs | None = None
        self._evaluations = 0
        self._problems: list[str] = []
        self._state: SessionState | None = None
        self._bins = BudgetBins()
        self._intervals: tuple[Interval, ...] = ()
        self._followed = FollowedRun(memory, run_id, baseline)
        self._run: RunSummary | None = None
        self._comparison: Comparison | None = None
        self._shift_change: Change | None = None
        self.awaits_host = False
        """A target is attached: nothing is evaluated before its first host reading (the GPUs
        alone, quiet in the first second, would call a job idle that is training)."""

    # ---- lifecycle ----

    def start(self, meta: Mapping[str, Any]) -> None:
        """Once, before the first reading: tells the sinks what the session is (``pid``: a
        target is attached, see ``awaits_host``)."""
        self.awaits_host = meta.get("pid") is not None
        if self.sinks:
            self.sinks.start(self.devices, {**self.sinks.meta, **meta})
        self._collect_problems()

    def close(self) -> list[str]:
        """Closes the sinks and keeps the run in the job's memory; the problems met in doing so
        (a last write that failed), one line each. Those met before are in the state, where the
        outputs already said them."""
        self._collect_problems()
        before = len(self._problems)
        self._followed.close(self._verdict)
        self._collect_memory_problems()
        self.sinks.close()
        self._collect_problems()
        return self._problems[before:]

    # ---- readings ----

    def gpu(self, samples: Sequence[GpuSample]) -> SessionState:
        for s in samples:
            self.timeline.append(s.key, s)
            self._gpus[s.index] = s
        if self.sinks:
            self.sinks.gpu(samples)
        return self._after_reading()

    def host(self, sample: HostSample) -> SessionState:
        self.timeline.append(sample.key, sample)
        if sample.state == "exited" and (self._host is None or self._host.state != "exited"):
            self._news = True  # the job ended: evaluated now, whatever the gaps
        self._host = sample
        if self.sinks:
            self.sinks.host(sample)
        return self._after_reading()

    def agents(self, sample: AgentsSample) -> SessionState:
        self.timeline.append(sample.key, sample)
        self._agents = sample
        opened = self._bins.open_start
        self._bins.add(sample)
        if self._bins.open_start != opened:  # an interval closed (or the first began)
            self._intervals = self._bins.closed
        self._follow_run(sample)
        # a socket refused as not the target's agent: each reading carries its lines once
        self._problems += [p for p in sample.problems if p not in self._problems]
        if self.sinks:
            self.sinks.agents(sample)
        return self._after_reading()

    def stacks(self, sample: StacksSample) -> SessionState:
        self.timeline.append(sample.key, sample)
        self._stacks = sample
        if self.sinks:
            self.sinks.stacks(sample)
        return self._after_reading()

    def take(self, kind: str, reading: Any, evaluate: bool = True) -> SessionState:
        """A reading of any kind (``READINGS``): what a loop over several sources calls.
        ``evaluate=False``: not evaluated now (a loop that reads several sources at once
        evaluates once after them: ``settle``)."""
        if kind not in READINGS:
            raise ValueError(f"unknown reading kind {kind!r}")
        held, self.evaluate_each = self.evaluate_each, self.evaluate_each and evaluate
        try:
            state: SessionState = getattr(self, kind)(reading)
            return state
        finally:
            if held and not evaluate:
                self._unevaluated = True
            self.evaluate_each = held

    @property
    def unevaluated(self) -> bool:
        """A reading came since the last evaluation and was not evaluated (``min_gap_s``)."""
        return self._unevaluated and self.evaluate_each

    def settle(self, force: bool = False) -> SessionState:
        """Evaluates now if a reading since the last evaluation was not evaluated, unless the
        evaluations' CPU share says to wait (``force``: whatever it says, the end of a run). The
        caller's timer is the minimum gap (``min_gap_s``)."""
        if self.unevaluated and (force or self._may_evaluate(min_gap=False)):
            self.evaluate()
        return self.state

    def _may_evaluate(self, min_gap: bool = True) -> bool:
        """The gap since the last evaluation has passed: ``min_gap_s``, or the last ones' CPU
        cost over ``evaluate_share``, whichever is longer."""
        if self._news:
            return True
        gap = self.min_gap_s if min_gap else 0.0
        if self.evaluate_share and self._costs:
            gap = max(gap, median(self._costs) / self.evaluate_share)
        last = self._evaluated_at
        return not gap or last is None or self._clock() - last >= gap

    def event(self, kind: str, data: Mapping[str, Any]) -> None:
        """Something that happened once (a capture started or ended, the target exited)."""
        if self.sinks:
            self.sinks.event(self._clock(), self._wall(), kind, dict(data))
            self._collect_problems()

    # ---- the run: its shifts, its pace, the job's last run ----

    def _follow_run(self, sample: AgentsSample) -> None:
        """The run followed: each shift of step time it calls is an event for the sinks."""
        for s, label, _ in self._followed.add(sample, self._verdict):
            self.event("step-shift", shift_event(s, label))
        self._collect_memory_problems()

    def remembered(self) -> Remembered | None:
        """This run as the job's memory keeps it, with the verdict shown (``FollowedRun``)."""
        return self._followed.remembered(self._verdict)

    def _collect_memory_problems(self) -> None:
        fresh = [x for x in self._followed.problems() if x not in self._problems]
        if fresh:
            self._problems += fresh
            self._changed()

    def _measure_run(self) -> None:
        """The run's figures at an evaluation (their cost is bounded with the verdict's)."""
        figures = self._followed.figures()
        self._run, self._comparison = figures.run, figures.comparison
        self._shift_change = figures.shift_change

    # ---- the verdict ----

    def point(self) -> EvalPoint | None:
        """Where the verdict is evaluated now: the newest GPU reading's time, and the host and
        stack windows ending at their own latest readings. Without GPUs (no driver) the newest
        reading of any source sets the clock; with GPUs, nothing is evaluated before their
        first reading (the GPU windows would be empty), nor before an attached target's first
        host reading."""
        h, st = self._host, self._stacks
        if self.awaits_host and h is None:
            return None
        if self._gpus:
            now = max(s.t for s in self._gpus.values())
        elif self.devices:
            return None
        else:
            times = [r.t for r in (h, self._agents, st) if r is not None]
            if not times:
                return None
            now = max(times)
        return EvalPoint(
            now=now,
            host=(h.key, h.t) if h is not None else None,
            stacks=(st.key, st.t) if st is not None else None,
        )

    def evaluate(
        self, point: EvalPoint | None = None, shown: Shown | None = None
    ) -> Verdict | None:
        """Every rule at ``point`` (default: ``point()``), hysteresis carried on; the sinks get
        the verdict shown. Returns the verdict computed (None when there is no point yet)."""
        point = point if point is not None else self.point()
        if point is None:
            return None
        cpu0 = self._cpu()
        computed, self._hysteresis, self._inputs = evaluate_at(
            self.timeline, self.devices, point, self._agents, self._hysteresis
        )
        self._measure_run()
        cost = self._cpu() - cpu0
        self._costs.append(cost)
        self._verdict = shown(computed) if shown is not None else computed
        self._point = point
        self._evaluations += 1
        self._evaluated_at = self._clock()
        self._unevaluated = False
        self._news = False
        if self.sinks:
            self.sinks.verdict(point, self._verdict)
        self._changed()
        return computed

    # ---- state ----

    @property
    def state(self) -> SessionState:
        """The state after the last reading or evaluation (built once per change)."""
        if self._state is None:
            self._collect_problems()
            self._state = SessionState(
                devices=self.devices,
                gpus=MappingProxyType(dict(self._gpus)),
                host=self._host,
                agents=self._agents,
                stacks=self._stacks,
                verdict=self._verdict,
                point=self._point,
                inputs=self._inputs,
                evaluations=self._evaluations,
                problems=tuple(self._problems),
                timeline=self.timeline,
                intervals=self._intervals,
                shifts=self._followed.shifts,
                run=self._run,
                comparison=self._comparison,
                shift_change=self._shift_change,
            )
        return self._state

    def _after_reading(self) -> SessionState:
        self._changed()
        if not self.evaluate_each:
            return self.state
        if self._may_evaluate():
            self.evaluate()
        else:
            self._unevaluated = True  # folded into the next evaluation
        return self.state

    def _changed(self) -> None:
        self._state = None

    def _collect_problems(self) -> None:
        if self.sinks.problems:
            self._problems += [p for p in self.sinks.problems if p not in self._problems]
            self.sinks.problems.clear()
            self._changed()
