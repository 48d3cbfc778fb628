"""The budget over time: each agent's new steps filed into the interval of the session clock
their reading came in, and each interval's job budget computed once, when it closes.

The budget itself sums a two-minute window, so a validation pass every N steps or a
checkpoint every M shows there only as a share; per interval it shows as a pattern (a column
every N steps), a one-off as a spike, a growing cost as a slope. Only the open interval's
steps are held; a closed interval keeps its budget alone. Pure (no clock: the readings' own
times), so the TUI, the recorder and a replay file the same readings into the same intervals.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from gputop.diagnose.budget import interval_budget
from gputop.model.budget import Budget
from gputop.model.steps import AgentsSample, AgentState, StepCursor, StepRecord, new_steps

INTERVAL_S = 5.0
"""The screen's interval: a step of a second or less gives five or more per column, and 120
columns are ten minutes."""
KEEP = 240
"""Closed intervals kept (20 minutes at 5 s): more than the widest terminal's columns."""
AGENTS_MAX = 256
"""Agents whose cursors are kept (8 nodes' ranks with room); past it, those of agents no longer
reporting are dropped."""


@dataclass(frozen=True, slots=True)
class Interval:
    """One closed interval of the budget over time."""

    start: float
    """Its start on the session clock (monotonic seconds)."""
    seconds: float
    budget: Budget | None
    """The job's budget from the steps that finished in it; None: none did (a stall, a long
    eval pass not ended yet, no agent)."""


class BudgetBins:
    """Intervals of ``seconds`` from the first reading on; ``add`` each agents' reading in the
    order they came; ``closed`` the last ``keep`` closed intervals, oldest first."""

    def __init__(
        self,
        seconds: float = INTERVAL_S,
        keep: int = KEEP,
        cursors: Mapping[int, StepCursor] | None = None,
        start: float | None = None,
        counted: Mapping[int, StepCursor] | None = None,
    ) -> None:
        """To go on from bins that stopped mid-session (a recording's summary carried them):
        ``start``, where their open interval began (``open_start``); ``cursors``, each agent's
        last step before it (``open_cursors``); ``counted``, each agent's last step read
        since (``counted``): the first reading's steps up to those go into the open interval,
        where the readings before it had put them, so the same steps land in the same
        intervals."""
        if not seconds > 0:
            raise ValueError(f"an interval must last longer than 0 s, not {seconds}")
        self.seconds = seconds
        self._closed: deque[Interval] = deque(maxlen=keep)
        self._cursors: dict[int, StepCursor | None] = dict(cursors or {})
        self._open: dict[int, tuple[AgentState, list[StepRecord]]] = {}
        self._start: float | None = start
        self._open_cursors: dict[int, StepCursor | None] = dict(self._cursors)
        self._counted = dict(counted) if counted is not None else None

    @property
    def closed(self) -> tuple[Interval, ...]:
        return tuple(self._closed)

    @property
    def open_start(self) -> float | None:
        """Where the open interval began (None before the first reading)."""
        return self._start

    @property
    def open_cursors(self) -> dict[int, StepCursor]:
        """Each agent's last step before the open interval."""
        return {pid: c for pid, c in self._open_cursors.items() if c is not None}

    @property
    def counted(self) -> dict[int, StepCursor]:
        """Each agent's last step read."""
        return {pid: c for pid, c in self._cursors.items() if c is not None}

    def add(self, sample: AgentsSample) -> None:
        t = sample.t
        if self._start is None:
            self._start = t
        elif t < self._start:
            return  # a reading from before the open interval: its steps were counted there
        if self._counted is not None:
            self._resume(sample, self._counted)
            self._counted = None
        self._close_until(t)
        if len(self._cursors) > AGENTS_MAX:  # agents gone: their cursors go too
            present = {a.pid for a in sample.agents}
            self._cursors = {p: c for p, c in self._cursors.items() if p in present}
        for a in sample.agents:
            fresh, self._cursors[a.pid] = new_steps(a.steps, self._cursors.get(a.pid))
            if fresh:
                self._file(a, fresh)

    def _resume(self, sample: AgentsSample, counted: Mapping[int, StepCursor]) -> None:
        """File the steps read before bins stopped (up to ``counted``) into the open interval."""
        for a in sample.agents:
            if a.pid not in counted:
                continue
            fresh, _ = new_steps(a.steps, self._cursors.get(a.pid))
            later, _ = new_steps(fresh, counted[a.pid])
            earlier = fresh[: len(fresh) - len(later)]
            if earlier:
                self._file(a, earlier)
                self._cursors[a.pid] = (earlier[-1].step, earlier[-1].t0_ns)

    def _file(self, a: AgentState, fresh: tuple[StepRecord, ...]) -> None:
        held = self._open.get(a.pid)
        steps = held[1] if held is not None else []
        steps.extend(fresh)
        self._open[a.pid] = (a, steps)

    def _close_until(self, t: float) -> None:
        """Close the open interval, and every empty one after it, up to the one ``t`` is in."""
        assert self._start is not None
        end = self._start + self.seconds
        if t < end:
            return
        budget = interval_budget(list(self._open.values()))
        self._closed.append(Interval(self._start, self.seconds, budget))
        self._open = {}
        self._open_cursors = dict(self._cursors)
        skipped = int((t - end) // self.seconds)
        kept = self._closed.maxlen or skipped
        for i in range(max(0, skipped - kept), skipped):  # only those that will be kept
            self._closed.append(Interval(end + i * self.seconds, self.seconds, None))
        self._start = end + skipped * self.seconds
