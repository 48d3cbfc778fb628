"""Replaying a recording through the same model and verdict code as the live monitor.

``Player`` feeds a ``Session`` record by record (the live monitor's one loop) and recomputes
the verdict at every recorded evaluation point; ``check``
compares each recomputed verdict with the recorded one (what the screen showed).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gputop.diagnose import Verdict
from gputop.record.events import RecordedVerdict
from gputop.record.reader import Record, Recording
from gputop.session import READINGS, Session, SessionState


class Player:
    """Replays a recording into a ``Session``: readings in their recorded order, the verdict
    recomputed at every recorded evaluation point (the hysteresis counts evaluations, so the
    points and their order are what make it equal). The replay screen and ``check`` drive one;
    the state shows the recorded verdict, with the recomputed rules' findings behind it."""

    def __init__(self, recording: Recording) -> None:
        self.session = Session(recording.devices, evaluate_each=False)
        self.recorded: RecordedVerdict | None = None

    def apply(self, rec: Record) -> Verdict | None:
        """Take one record; for an evaluation, the recomputed verdict (None otherwise)."""
        if rec.kind in READINGS:
            self.session.take(rec.kind, rec.value)
        elif rec.kind == "verdict":
            point, recorded = rec.value
            self.recorded = recorded
            return self.session.evaluate(point, lambda v: recorded.as_verdict(v.findings))
        return None

    @property
    def state(self) -> SessionState:
        return self.session.state


def same(recomputed: Verdict, recorded: RecordedVerdict) -> bool:
    return RecordedVerdict.of(recomputed) == recorded


@dataclass
class Check:
    """What ``check`` found: whether verdicts recomputed from readings equal the recorded ones."""

    evaluations: int = 0
    mismatches: list[str] = field(default_factory=list)
    changes: list[tuple[float, str | None]] = field(default_factory=list)
    """The recorded verdict timeline: (seconds from the start, principal bound)."""
    damage: str | None = None

    @property
    def ok(self) -> bool:
        return self.evaluations > 0 and not self.mismatches

    def text(self) -> str:
        lines = [
            f"{self.evaluations} recorded verdicts recomputed from the recorded readings: "
            + ("all equal" if not self.mismatches else f"{len(self.mismatches)} differ")
        ]
        lines += [f"  {m}" for m in self.mismatches[:20]]
        if self.damage:
            lines.append(f"note: the recording {self.damage}")
        return "\n".join(lines)


def check(recording: Recording, records: Iterable[Record] | None = None) -> Check:
    """Recompute every recorded verdict; say where one differs (time and both bounds)."""
    player = Player(recording)
    out = Check()
    last: str | None = "-"
    for rec in records if records is not None else recording.records():
        verdict = player.apply(rec)
        if verdict is None or player.recorded is None:
            continue
        out.evaluations += 1
        rel = rec.t - recording.t0
        recorded = player.recorded
        bound = recorded.principal.bound if recorded.principal else None
        if bound != last:
            out.changes.append((rel, bound))
            last = bound
        if not same(verdict, recorded):
            got = verdict.principal.bound if verdict.principal else None
            out.mismatches.append(f"at {rel:.1f} s: recorded {bound}, recomputed {got}")
    out.damage = recording.damage
    return out
