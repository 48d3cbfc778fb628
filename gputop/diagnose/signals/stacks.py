"""The stack dumps of the window reduced to what the rules read: the main threads' phase
shares, each main thread's current run of one stack, where DataLoader workers sit, the job's
own code. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from gputop.model import Window
from gputop.model.roles import WORKER
from gputop.model.slice_work import SliceWork, by_phase, slice_work
from gputop.model.stack_stats import (
    MainPhases,
    OwnCode,
    Stillness,
    main_phases,
    own_code,
    stillness,
    thread_shares,
    user_frame,
    waits_in,
    worker_mains,
)
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.vocab.stacks import CHECKPOINT_SAVE, EVAL, FETCH, LOGGING, USER_CODE

WORK_PHASES = frozenset({FETCH, CHECKPOINT_SAVE, LOGGING, EVAL, USER_CODE})
"""The main threads' phases whose work is grouped by kind (``StackSignals.work``): what
consumes the data, side-work and loop slices."""


@dataclass(frozen=True, kw_only=True)
class StackSignals:
    """The stack dumps of the window reduced to phase shares and parked main threads."""

    samples: int
    main_shares: dict[str, float]
    """Phase shares of the main threads of the main process and ranks."""
    main_running: dict[str, float]
    """Of those threads' samples in each phase, the share in which they ran
    (``ThreadShares.ran``)."""
    errors: tuple[str, ...]
    still: tuple[Stillness, ...] = ()
    """Every main and rank process's current run of one main-thread stack (the hang rule)."""
    workers_at: tuple[tuple[int, Frame | None, Frame | None], ...] = ()
    """(pid, innermost frame, innermost frame outside the stdlib) of each DataLoader worker's
    main thread as last dumped: where a worker that does nothing sits."""
    own_code: OwnCode | None = None
    """The main threads' time in the job's own code outside every training phase (logging,
    metrics, Python between batches) once they train, and where (``stack_stats.own_code``)."""
    per_process: tuple[MainPhases, ...] = ()
    """Each main and rank process's main-thread phases since it began to train (the budget)."""
    last: tuple[ProcessStacks, ...] = ()
    """The latest reading's processes, every thread: what a hang's other threads do."""
    work: Mapping[str, SliceWork] = field(default_factory=dict)
    """What the threads doing a slice's work spend it on, by kind and function: the main
    threads by phase (``WORK_PHASES``), DataLoader workers making batches as
    ``slice_work.WORKERS`` (``model/slice_work.py``)."""

    def threads_of(self, pid: int) -> tuple[ThreadStack, ...]:
        """``pid``'s threads in the latest reading (none when it was not read, or failed)."""
        proc = next((p for p in self.last if p.pid == pid and not p.error), None)
        return proc.threads if proc is not None else ()


def stack_signals(window: Window[StacksSample] | None) -> StackSignals | None:
    if window is None or not window.samples:
        return None
    shares = thread_shares(window.samples, main_only=True)
    mains = [s for s in shares if s.role != WORKER]
    total = sum(s.samples for s in mains)
    combined: dict[str, float] = {}
    ran: Counter[str] = Counter()
    for s in mains:
        for phase, share in s.shares:
            combined[phase] = combined.get(phase, 0.0) + share * s.samples / max(total, 1)
        ran.update(s.ran)
    errors = tuple({p.error for s in window.samples[-1:] for p in s.processes if p.error})
    workers_at = tuple(
        (pid, waits_in(t, by_phase=False), user_frame(t.frames))
        for pid, t in worker_mains(window.samples).items()
    )
    return StackSignals(
        samples=total,
        main_shares=combined,
        main_running={p: ran[p] / (share * total) for p, share in combined.items()},
        errors=errors,
        still=tuple(stillness(window.samples)),
        workers_at=workers_at,
        own_code=own_code(window.samples),
        per_process=tuple(main_phases(window.samples)),
        last=window.samples[-1].processes,
        work=slice_work(window.samples, by_phase(WORK_PHASES)),
    )
