"""Replaying a recording through the same model and verdict code as the live monitor.

``Player`` rebuilds the live state record by record (Timeline, the latest host, agents and
stacks readings) and recomputes the verdict at every recorded evaluation point; ``check``
compares each recomputed verdict with the recorded one (what the screen showed).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gputop.diagnose import State, Verdict
from gputop.diagnose.point import evaluate_at
from gputop.model import Timeline
from gputop.model.host import HostSample
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample
from gputop.record.events import RecordedVerdict
from gputop.record.reader import Record, Recording


class Player:
    """The live state at the last record applied (the TUI's replay mode drives one too)."""

    def __init__(self, recording: Recording) -> None:
        self.devices = recording.devices
        self.timeline = Timeline()
        self.host: HostSample | None = None
        self.agents: AgentsSample | None = None
        self.stacks: StacksSample | None = None
        self.state = State()
        self.recorded: RecordedVerdict | None = None

    def apply(self, rec: Record, recompute: bool = True) -> Verdict | None:
        """Take one record; for an evaluation, the recomputed verdict (None otherwise)."""
        if rec.kind == "gpu":
            self.timeline.extend(rec.value)
        elif rec.kind == "host":
            self.host = rec.value
            self.timeline.append(rec.value.key, rec.value)
        elif rec.kind == "agents":
            self.agents = rec.value
            self.timeline.append(rec.value.key, rec.value)
        elif rec.kind == "stacks":
            self.stacks = rec.value
            self.timeline.append(rec.value.key, rec.value)
        elif rec.kind == "verdict":
            point, self.recorded = rec.value
            if recompute:
                verdict, self.state, _ = evaluate_at(
                    self.timeline, self.devices, point, self.agents, self.state
                )
                return verdict
        return None


def same(recomputed: Verdict, recorded: RecordedVerdict) -> bool:
    return RecordedVerdict.of(recomputed) == recorded


@dataclass
class Check:
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
