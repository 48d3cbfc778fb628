"""The run a session follows: the shifts of its step time, its pace, the job it is and that
job's last run, and this run kept in the job's memory.

The session hands it every agents' reading and asks it for the figures at each evaluation; it
holds no reading of its own beyond the steps it sums (``RunSteps``, ``ShiftWatch``), does no
I/O but through the injected ``JobMemory``, and knows no clock: the readings' times are its
clock. One writer, like the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gputop import __version__
from gputop.diagnose import (
    STEPS_LEAST,
    Change,
    Comparison,
    Remembered,
    RememberedLever,
    RunSteps,
    RunSummary,
    Shift,
    ShiftWatch,
    Verdict,
    change_between,
    compare,
    flat_settings,
)
from gputop.model.job_key import JobKey, job_key
from gputop.model.ranks import main_agent, rank_labels
from gputop.model.steps import AgentsSample

KEEP_S = 60.0
"""How often (seconds of readings) the run is written to the job's memory besides at the end:
a monitor killed without a goodbye loses at most this much."""
SHIFTS_SHOWN = 32
"""Shifts of step time a state carries, the latest."""

Called = tuple[Shift, str, float]
"""A shift of a rank's step time, its rank's label and the reading's time it was called at."""


class JobMemory(Protocol):
    """Where runs of a job are remembered (``gputop/history/store.Memory``): asked for the
    job's last run once the job is known, and told this run as it goes."""

    problem: str | None
    notes: list[str]

    def last(self, key: JobKey, besides: str = "") -> Remembered | None: ...

    def keep(self, run: Remembered, run_id: str) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RunFigures:
    """The run as of one evaluation: what the state carries."""

    run: RunSummary
    comparison: Comparison | None
    """Against the job's last run (or the baseline given)."""
    shift_change: Change | None
    """The latest shift's rank since it against before it."""


class FollowedRun:
    """One run, followed reading by reading (module docstring)."""

    def __init__(
        self, memory: JobMemory | None, run_id: str = "", baseline: Remembered | None = None
    ) -> None:
        """``memory``: the jobs' memory, this run kept there as ``run_id``; ``baseline``: the
        run this one is compared with (``diagnose --baseline FILE``), else the job's last one
        in ``memory``."""
        self._memory = memory
        self._run_id = run_id
        self._watch = ShiftWatch()
        self._steps = RunSteps()
        self.shifts: tuple[Called, ...] = ()
        """Every shift called, oldest first (the latest SHIFTS_SHOWN)."""
        self._key: JobKey | None = None
        self._key_of: tuple[tuple[str, ...], str | None, int | None] | None = None
        """What the key was made of (the main agent's argv, cwd and world size)."""
        self._settings: dict[str, str] = {}
        self._last = baseline
        self._fixed_baseline = baseline is not None
        self._started_wall: float | None = None
        self._last_wall = 0.0
        self._kept_at: float | None = None
        self._comparison: Comparison | None = None

    def add(self, sample: AgentsSample, shown: Verdict | None) -> tuple[Called, ...]:
        """One agents' reading: the shifts it lets the watch call (new ones), the run's pace
        summed, the job known (its key remade while it changes); kept in the memory every
        KEEP_S of readings with ``shown``, the verdict the screen shows."""
        called = self._watch.add([(a.pid, a.steps) for a in sample.agents])
        new: tuple[Called, ...] = ()
        if called:
            labels = rank_labels(sample)
            new = tuple((s, labels.get(s.pid, f"pid {s.pid}"), sample.t) for s in called)
            self.shifts = (self.shifts + new)[-SHIFTS_SHOWN:]
        main = main_agent(sample)
        self._steps.add(main, sample.agents)
        if self._started_wall is None:
            self._started_wall = sample.wall
        self._last_wall = sample.wall
        if main is not None and main.fingerprint:
            self._settings = flat_settings(main.fingerprint)
        if main is not None:
            self._know_job(main.argv, main.cwd, main.world_size)
        if self._kept_at is None:
            self._kept_at = sample.t
        elif sample.t - self._kept_at >= KEEP_S:
            self._kept_at = sample.t
            self.keep(shown)
        return new

    def _know_job(self, argv: tuple[str, ...], cwd: str | None, world: int | None) -> None:
        """The job's key from its main agent, remade while what it is made of changes (the
        world size of a job started by torch.multiprocessing.spawn is known only once its
        process group is up); its last run looked up again for a new key, unless a baseline
        was given."""
        said = (argv, cwd, world)
        if said == self._key_of:
            return
        self._key_of = said
        key = job_key(argv, cwd, world)
        if key is None or (self._key is not None and key.id == self._key.id):
            self._key = key or self._key
            return
        self._key = key
        if self._memory is not None and not self._fixed_baseline:
            self._last = self._memory.last(key, besides=self._run_id)
            self._comparison = None

    def figures(self) -> RunFigures:
        """The run's pace, its comparison with the last run and the latest shift's change, now
        (at an evaluation: their cost is bounded with the verdict's)."""
        run = self._steps.summary()
        change = None
        if self.shifts:
            latest = self.shifts[-1][0]
            change = change_between(latest.before, self._watch.since(latest.pid))
        if self._last is not None and self._key is not None and run.steps:
            self._comparison = compare(self._last, run, self._key, self._settings)
        return RunFigures(run, self._comparison, change)

    def remembered(self, shown: Verdict | None, run: RunSummary | None = None) -> Remembered | None:
        """This run as the job's memory keeps it (``run``: its pace, if already summed): its
        pace, settings, the verdict shown and its first lever; None before the job is known
        or with too few steps to compare with (``STEPS_LEAST``)."""
        if self._key is None or self._started_wall is None:
            return None
        run = run if run is not None else self._steps.summary()
        if run.steps < STEPS_LEAST:
            return None
        principal = shown.principal if shown is not None else None
        lever = None
        if principal is not None and principal.levers:
            first, saving = principal.levers[0], principal.saving
            sized = (saving.share, saving.low, saving.high) if saving else (None, None, None)
            lever = RememberedLever(str(first), getattr(first, "saves", None), *sized)
        return Remembered(
            key=self._key,
            started=self._started_wall,
            ended=self._last_wall,
            run=run,
            settings=self._settings,
            principal=principal.bound if principal is not None else None,
            lever=lever,
            version=__version__,
        )

    def keep(self, shown: Verdict | None) -> None:
        """This run into the job's memory, once it has steps enough to compare with."""
        if self._memory is None:
            return
        kept = self.remembered(shown)
        if kept is not None:
            self._memory.keep(kept, self._run_id)

    def close(self, shown: Verdict | None) -> None:
        """The run kept a last time, the memory closed."""
        self.keep(shown)
        if self._memory is not None:
            self._memory.close()

    def problems(self) -> list[str]:
        """What the memory met (a folder it may not use, a damaged file), every line once."""
        m = self._memory
        if m is None:
            return []
        lines = ([m.problem] if m.problem else []) + list(m.notes)
        return list(dict.fromkeys(lines))


def shift_event(s: Shift, label: str) -> dict[str, Any]:
    """A shift as a session event (recorded; the report lists them)."""
    return {
        "rank": label,
        "pid": s.pid,
        "step": s.step,
        "before_s": s.before_s,
        "after_s": s.after_s,
        "moved_s": dict(s.moved),
    }
