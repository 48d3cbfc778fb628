"""When an armed capture is due: the events a user arms with ``--arm``, read from the session's
state as the verdict says them, so a capture fires on what the screen shows and nothing else.

- ``hung``: the principal bound is a hang (fires at once, even in warm-up: a job that hangs
  while starting is the one to catch);
- ``straggler``: the verdict names a straggler (principal or secondary) and the ranks' model
  names its rank; a rank that becomes the straggler in another's place fires again;
- ``regression``: a rank's step time shifts slower (``diagnose/step_shift``: a change point
  against the run's own recent past);
- ``verdict``: the principal bound changes and holds for HOLD_S;
- ``memory``: a memory risk (``diagnose/risks``) starts to hold.

Each fires on its rising edge and re-arms when its condition ends. Nothing but a hang fires
in a job's first WARMUP_S (compilation, caches, the first epoch's files): what holds at its end
fires then. Pure: the caller passes the state and the job's age.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop.diagnose import Verdict
from gputop.session import SessionState
from gputop.vocab.arm import HANG, MEMORY, REGRESSION, STRAGGLING, VERDICT
from gputop.vocab.bounds import HUNG, STRAGGLER

WARMUP_S = 60.0
"""A job's first minute: only a hang fires in it."""
HOLD_S = 30.0
"""A new principal bound must hold this long before ``verdict`` fires (a flapping verdict is
what the hysteresis is for; this is the user's "and stays so")."""


@dataclass(frozen=True)
class Fired:
    """One trigger that fired: what, why in one line, and the ranks a capture should look at."""

    trigger: str
    why: str
    t: float
    """The session's time of the evaluation that fired it."""
    pid: int | None = None
    """The rank the event is about (the straggler, the rank whose step time shifted)."""
    typical: int | None = None
    """A rank to compare it with (the one nearest the median's work), where there are ranks."""


class TriggerWatch:
    """The armed triggers' edges across evaluations (one writer: the loop that evaluates)."""

    def __init__(
        self, armed: frozenset[str], warmup_s: float = WARMUP_S, hold_s: float = HOLD_S
    ) -> None:
        self.armed = armed
        self.warmup_s = warmup_s
        self.hold_s = hold_s
        self._held: dict[str, object] = {}
        """Trigger -> what it last fired on (None while its condition does not hold)."""
        self._principal: str | None = None
        """The principal ``verdict`` compares with: the one that held last."""
        self._shifts_seen = 0
        self._evaluation = -1

    def check(self, state: SessionState, age_s: float | None) -> list[Fired]:
        """The triggers that fire at this state (each evaluation looked at once); ``age_s``:
        the job's age (None: unknown, taken as past warm-up)."""
        v, point = state.verdict, state.point
        if v is None or point is None or state.evaluations == self._evaluation:
            return []
        self._evaluation = state.evaluations
        warm = age_s is not None and age_s < self.warmup_s
        now = point.now
        out: list[Fired] = []
        principal = v.principal.bound if v.principal is not None else None
        if HANG in self.armed:
            self._edge(out, HANG, principal == HUNG, now, _principal_line(v))
        if warm:
            self._shifts_seen = len(state.shifts)  # a shift in warm-up is the warm-up's
            return out
        if STRAGGLING in self.armed:
            slow, typical = _straggler(state)
            named = slow is not None and STRAGGLER in _shown_bounds(v)
            self._edge(out, STRAGGLING, named, now, _finding_line(v, STRAGGLER), slow, typical,
                       key=slow)  # fmt: skip
        if REGRESSION in self.armed:
            out += self._regressions(state, now)
        if VERDICT in self.armed:
            out += self._verdict(v, principal, now)
        if MEMORY in self.armed:
            risk = next(iter(v.risks), None)
            self._edge(out, MEMORY, risk is not None, now, risk or "")
        return out

    def _edge(
        self,
        out: list[Fired],
        trigger: str,
        holds: bool,
        now: float,
        why: str,
        pid: int | None = None,
        typical: int | None = None,
        key: object = True,
    ) -> None:
        """Fire on the rising edge (or when what holds changes: another rank), re-arm on the
        falling one."""
        if not holds:
            self._held.pop(trigger, None)
            return
        if self._held.get(trigger) != key:
            self._held[trigger] = key
            out.append(Fired(trigger, why, now, pid, typical))

    def _regressions(self, state: SessionState, now: float) -> list[Fired]:
        new = state.shifts[self._shifts_seen :] if len(state.shifts) >= self._shifts_seen else ()
        self._shifts_seen = len(state.shifts)
        return [
            Fired(
                REGRESSION,
                f"{label}: step {s.before_s * 1e3:.0f} -> {s.after_s * 1e3:.0f} ms "
                f"({s.rel:+.0%}) from step {s.step}",
                now,
                s.pid,
            )
            for s, label, _ in new
            if s.after_s > s.before_s
        ]

    def _verdict(self, v: Verdict, principal: str | None, now: float) -> list[Fired]:
        """A principal that replaced the last one that held, once it has held HOLD_S."""
        if principal is None or v.since is None or now - v.since < self.hold_s:
            return []
        before, self._principal = self._principal, principal
        if before is None or before == principal:
            return []  # the first principal is where the job starts, not a change
        return [Fired(VERDICT, f"{before} -> {principal}: {_principal_line(v)}", now)]


def _shown_bounds(v: Verdict) -> set[str]:
    return {f.bound for f in (v.principal, *v.secondary) if f is not None}


def _principal_line(v: Verdict) -> str:
    p = v.principal
    return f"{p.bound}: {p.summary}" if p is not None else v.note


def _finding_line(v: Verdict, bound: str) -> str:
    f = next((f for f in (v.principal, *v.secondary) if f is not None and f.bound == bound), None)
    return f"{f.bound}: {f.summary}" if f is not None else bound


def _straggler(state: SessionState) -> tuple[int | None, int | None]:
    """The straggler's pid by the ranks' model, and the rank nearest the median's work."""
    steps = state.inputs.steps if state.inputs is not None else None
    work = steps.rank_work if steps is not None else None
    slow = work.straggler if work is not None else None
    if work is None or slow is None:
        return None, None
    median = slow.median_work_ms
    others = [r for r in work.rows if r.pid is not None and r.pid != slow.row.pid]
    typical = min(others, key=lambda r: abs(r.work_ms - median), default=None)
    return slow.row.pid, typical.pid if typical is not None else None
