"""A whole run's steps kept in bounded memory: the mean step and each slice's share since the
run began, with errors that hold for correlated steps. What "this run" is in a before/after
(``run_compare``) and what the job's memory keeps of a run (``gputop/history``).

The main agent's steps (rank 0's, ``model.ranks.main_agent``, as the session found it) after
the first WARMUP_STEPS (compilation, autotuning, the first batches) are summed into batches
of consecutive steps;
past BATCHES_MOST batches, neighbours are merged two by two, so a day of steps is a few
hundred numbers and the batch-means error (``batch_means``) is read from any size of batch.
Pure: readings in, a summary out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop.diagnose.batch_means import Mean, mean_of_batches
from gputop.diagnose.step_sums import BATCH_STEPS, batch_spread, step_slices
from gputop.model.steps import AgentState, StepCursor, new_steps
from gputop.vocab import budget as b

WARMUP_STEPS = BATCH_STEPS
"""A run's first steps, left out: compilation, autotuning and the first batches are not the
job's pace."""
BATCHES_MOST = 256
"""Batches kept; past it, merged two by two (the batch's size doubles)."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A run's pace: the mean step and each slice's share with one standard error."""

    step: Mean
    """Seconds per step."""
    shares: Mapping[str, tuple[float, float]]
    """Slice -> (share of the run's step time, one standard error); every slice."""

    @property
    def steps(self) -> int:
        return self.step.steps


class RunSteps:
    """The run so far; ``add`` every agents' reading in the order they came."""

    def __init__(self) -> None:
        self._pid: int | None = None
        self._cursor: StepCursor | None = None
        self._seen = 0
        self._size = BATCH_STEPS
        self._batches: list[list[float]] = []
        """Each [steps, dur_ns, ns per slice in SLICES order...], the last one open."""
        self._errors: tuple[tuple[int, int], float, dict[str, float]] | None = None
        """The errors of the step and shares, and the whole batches they were read from (how
        many, of what size): remade when a batch closes (1.7 ms from 256 batches)."""

    def add(self, main: AgentState | None, agents: Sequence[AgentState]) -> None:
        """One reading: its ``main`` agent (``model.ranks.main_agent``) and all its
        ``agents``."""
        agent = main
        if agent is None:
            return
        if self._pid is None:
            self._pid = agent.pid
        elif agent.pid != self._pid:
            # the main agent changed (a rank that reported first was not rank 0): follow it
            # only while nothing was summed yet
            if self._batches:
                agent = next((a for a in agents if a.pid == self._pid), None)
                if agent is None:
                    return
            else:
                self._pid, self._cursor, self._seen = agent.pid, None, 0
        fresh, self._cursor = new_steps(agent.steps, self._cursor)
        for s in fresh:
            self._seen += 1
            if self._seen <= WARMUP_STEPS:
                continue
            if not self._batches or self._batches[-1][0] >= self._size:
                self._open_batch()
            row = self._batches[-1]
            row[0] += 1
            row[1] += s.dur_ns
            for i, ns in enumerate(step_slices(s)):
                row[2 + i] += ns

    def _open_batch(self) -> None:
        if len(self._batches) >= BATCHES_MOST:
            merged = []
            for i in range(0, len(self._batches) - 1, 2):
                merged.append(
                    [x + y for x, y in zip(self._batches[i], self._batches[i + 1], strict=True)]
                )
            self._batches = merged
            self._size *= 2
        self._batches.append([0.0] * (2 + len(b.SLICES)))

    def summary(self) -> RunSummary:
        """The run's mean step and shares, from its whole batches (the open one's steps count
        in the totals, not in the errors)."""
        whole = [r for r in self._batches if r[0] >= self._size]
        steps = int(sum(r[0] for r in self._batches))
        total = sum(r[1] for r in self._batches)
        read = (len(whole), self._size)
        if self._errors is None or self._errors[0] != read:
            error = mean_of_batches([r[1] / r[0] / 1e9 for r in whole], self._size, steps).error
            self._errors = (read, error, batch_spread(dict(enumerate(r[2:] for r in whole))))
        _, error, spread = self._errors
        step = Mean(total / steps / 1e9 if steps else 0.0, error, steps)
        ns = [sum(r[2 + i] for r in self._batches) for i in range(len(b.SLICES))]
        wall = sum(ns)
        shares = {
            name: (ns[i] / wall if wall > 0 else 0.0, spread[name])
            for i, name in enumerate(b.SLICES)
        }
        return RunSummary(step, shares)
