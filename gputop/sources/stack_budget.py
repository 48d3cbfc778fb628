"""Which processes py-spy reads now, within a fixed share of one core.

A dump costs 15-25 ms of CPU (docs/facts/capture.md, "py-spy's cost"), so reading every
process of an 8-rank job with 8 DataLoader workers each once a second would cost most of a
core, on the machine the job needs. The budget is a token bucket: CPU seconds accrue at
``share`` per second (a short burst's worth at most) and each dump spends what it really cost
(the CPU its py-spy used). The tokens go where a read tells most:

1. a process that just went still (its stack unchanged for a read or two after it had been
   moving, or its agent's samples stopped): a hang candidate, read twice as often;
2. main processes and ranks with no agent sampling them, once per period (a launcher, with
   ranks below it, as seldom as a quiet rank's workers);
3. DataLoader workers, one of each rank's workers at a time, in turn (one read per WORKER_TURN
   periods for them all), QUIET_SLOWER times less often while their rank is not waiting for
   data: a worker's stack says why a rank waits for its batches (the transform, the reads, too
   few workers: docs/facts/bounds.md, "data-input"), and tells nothing while the rank does not
   wait;
4. with tokens nothing above wants (beyond SPARE_KEEP dumps' worth, kept for what turns due
   next), a waiting rank's workers again, up to one read a period per rank: what a batch is
   made of is named from a handful of worker samples, and at one per WORKER_TURN periods a
   small job (one process, its agent sampling it, two workers) took over 20 s to show five;

and a process whose stack has not changed for SETTLED reads (a parked helper; a rank's workers
when all of them are) is read SETTLED_SLOWER times less often. Pure bookkeeping: the caller
runs py-spy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputop.model.roles import WORKER
from gputop.vocab.stacks import STACKS_PERIOD_S

DEFAULT_SHARE = 0.02
"""py-spy's CPU, as a share of one core, unless the user says otherwise (--stacks-budget)."""
FIRST_COST_S = 0.02
"""A dump's cost before any was measured (docs/facts/capture.md, "py-spy's cost")."""
BURST_DUMPS = 2.0
"""Tokens kept at most beyond one period's share, in dumps: a quiet spell does not buy a later
burst."""
SETTLED = 3
"""Reads with an unchanged stack after which a process is settled (read less often)."""
SETTLED_SLOWER = 4.0
HANG_FASTER = 2.0
WORKER_TURN = 4.0
"""A rank's DataLoader workers together get one read per this many periods: what a worker does
(fetching, idle) changes slowly and tells less than where the ranks are."""
QUIET_SLOWER = 30.0
"""How much less often a rank's workers are read while the rank is not waiting for data (one
of them every 2 min: enough for the stacks pane; the rank's own stacks, read once a second by
its agent or as the budget allows, are what say when its workers matter again)."""
WAITED_LATELY_S = 30.0
"""A rank seen waiting for data (any thread in the data-wait phase) this recently is waiting:
at one read a second, a rank that waits 10% of its time is seen within it 19 times in 20."""
SPARE_KEEP = 1.0
"""Dumps' worth of tokens the spare reads of waiting ranks' workers (4.) leave in the bucket."""
COST_WEIGHT = 0.2
"""Weight of the newest dump in the running cost estimate."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A process py-spy could read: who it is and what is known of it."""

    pid: int
    role: str
    parent: int
    """Its parent's pid: a rank's workers share one turn."""
    still: int
    """Reads in a row that found its stack unchanged."""
    last_read: float | None
    """When py-spy (or its agent) last read it; None: never."""
    agent_stalled: bool = False
    """Its agent sampled it, and stopped: whatever holds the GIL is what to see."""
    parent_waits: bool = True
    """A worker's: its rank was seen waiting for data lately (or has not been read yet)."""
    launcher: bool = False
    """Ranks run below it (torchrun, accelerate, ``mp.spawn``'s parent): its stack says
    nothing of a step, and it is read as a quiet rank's workers are."""


def _hang_candidate(c: Candidate) -> bool:
    """Its agent's samples stopped, or a main process or rank just went still."""
    return c.agent_stalled or (c.role != WORKER and not c.launcher and 0 < c.still < SETTLED)


class StackBudget:
    """``due(now, candidates)`` picks the reads to make; ``spent(cost)`` after each one."""

    def __init__(self, share: float = DEFAULT_SHARE, period: float = STACKS_PERIOD_S) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"the stacks budget must be above 0 and at most 1 core, not {share}")
        self.share = share
        self.period = period
        self.cost = FIRST_COST_S
        """The running estimate of one dump's CPU seconds."""
        self.tokens = FIRST_COST_S
        self._t: float | None = None
        self._appeared: dict[int, float] = {}
        """A parent's pid -> when its workers were first candidates."""
        self.used = 0.0
        """CPU seconds py-spy has used in all (what the panes report as its cost)."""

    def _accrue(self, now: float) -> None:
        if self._t is not None and now > self._t:
            cap = BURST_DUMPS * self.cost + self.share * self.period
            self.tokens = min(self.tokens + (now - self._t) * self.share, cap)
        self._t = now

    def period_of(self, c: Candidate) -> float:
        """Seconds between reads of ``c``, any process but a DataLoader worker."""
        if _hang_candidate(c):
            return self.period / HANG_FASTER
        if c.launcher:
            return self.period * WORKER_TURN * QUIET_SLOWER
        return self.period * SETTLED_SLOWER if c.still >= SETTLED else self.period

    def turn_of(self, workers: Sequence[Candidate]) -> float:
        """Seconds between reads of one rank's workers, all of them together."""
        p = self.period * WORKER_TURN
        if not workers[0].parent_waits:
            p *= QUIET_SLOWER
        if all(w.still >= SETTLED for w in workers):
            p *= SETTLED_SLOWER
        return p

    def due(self, now: float, candidates: Sequence[Candidate]) -> list[int]:
        """The pids to read now, most telling first, as many as the tokens pay for."""
        self._accrue(now)
        ranked = []
        turns: dict[int, list[Candidate]] = {}
        for c in candidates:
            if c.role == WORKER:
                turns.setdefault(c.parent, []).append(c)
                continue
            lateness = _lateness(now, c.last_read, self.period_of(c))
            if lateness >= 1.0:
                tier = 0 if _hang_candidate(c) else 1
                ranked.append((tier, -lateness, c.pid))
        self._appeared = {p: self._appeared.get(p, now) for p in turns}
        for parent, workers in turns.items():
            read = [w.last_read for w in workers if w.last_read is not None]
            last = max(read) if read else None
            if last is None and not workers[0].parent_waits:
                last = self._appeared[parent]  # a quiet rank's new workers wait a turn too
            lateness = _lateness(now, last, self.turn_of(workers))
            # the worker read longest ago (never first) takes the turn
            nxt = min(workers, key=lambda w: (w.last_read is not None, w.last_read, w.pid))
            if lateness >= 1.0:
                ranked.append((2, -lateness, nxt.pid))
            elif self._spare(workers) and (spare := _lateness(now, last, self.period)) >= 1.0:
                ranked.append((3, -spare, nxt.pid))
        ranked.sort()
        out: list[int] = []
        budget = self.tokens
        for tier, _, pid in ranked:
            if budget < self.cost * (1 + (SPARE_KEEP if tier == 3 else 0)):
                break
            out.append(pid)
            budget -= self.cost
        return out

    @staticmethod
    def _spare(workers: Sequence[Candidate]) -> bool:
        """A rank's workers that spare tokens may read: its rank waits for data and they are
        not all parked."""
        return workers[0].parent_waits and not all(w.still >= SETTLED for w in workers)

    def spent(self, cost: float) -> None:
        """One dump done: its CPU seconds leave the bucket and refine the estimate."""
        cost = min(max(cost, 0.0), 1.0)
        self.tokens -= cost
        self.used += cost
        self.cost += COST_WEIGHT * (cost - self.cost)


def _lateness(now: float, last_read: float | None, period: float) -> float:
    """Periods since the last read: 1 or more is due; never read is due first."""
    return 1e9 if last_read is None else (now - last_read) / period
