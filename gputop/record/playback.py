"""A recording played into a ``Session`` on a clock that can pause, seek and change speed.

This is replay's source and clock: records are applied in their recorded order up to the
playback position (``Player``: readings into the session, verdicts recomputed at the recorded
points), and the session's state is what the replay screen draws. No Textual: the screen only
ticks it and draws. Seeking back starts a new session a minute before the target (the longest
window a pane or rule reads) and plays up to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gputop.diagnose import Verdict
from gputop.record.reader import Record, Recording
from gputop.record.replay import Player, same
from gputop.session import Session

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0)
LEAD_S = 60.0
"""History replayed before a seek target: the longest window a pane or rule reads."""


class Playback:
    """The playback position in a recording and the session it has been played into."""

    def __init__(self, recording: Recording, speed: float = 1.0) -> None:
        self.recording = recording
        self.speed = min(SPEEDS, key=lambda s: abs(s - speed))
        self.playing = True
        self.at = 0.0
        """Seconds since the recording's first reading."""
        self.start_t, self.end_t = recording.span()
        self.mismatch: str | None = None
        """The first time a recomputed verdict differed from the recorded one, in words."""
        self._reset(0.0)

    @property
    def session(self) -> Session:
        return self.player.session

    @property
    def total(self) -> float:
        return self.end_t - self.start_t

    @property
    def ended(self) -> bool:
        return self._next is None

    @property
    def status(self) -> str:
        return "playing" if self.playing else "end" if self.ended else "paused"

    def _reset(self, lead_from: float) -> None:
        self.player = Player(self.recording)
        self._records: Iterator[Record] = self.recording.records(start=self.start_t + lead_from)
        self._next: Record | None = next(self._records, None)

    def advance(self, to: float) -> list[dict[str, Any]]:
        """Apply every record up to ``to`` seconds; the capture events met on the way. At the
        end, every record left: the span ends at the last frame's start or the last summary,
        and the last second's readings (and the verdicts on them) come after it."""
        captures = []
        end = to >= self.total
        while self._next is not None and (end or self._next.t - self.start_t <= to):
            rec = self._next
            recomputed = self.player.apply(rec)
            if rec.kind == "event" and rec.value[0] == "capture":
                captures.append(rec.value[1])
            elif recomputed is not None and self.player.recorded is not None:
                self._compare(rec, recomputed)
            self._next = next(self._records, None)
        self.at = min(to, self.total)
        if self._next is None:
            self.playing = False
        return captures

    def tick(self, seconds: float) -> list[dict[str, Any]]:
        """``seconds`` of wall time passed: play them at the current speed."""
        return self.advance(self.at + seconds * self.speed) if self.playing else []

    def seek(self, target: float) -> tuple[bool, list[dict[str, Any]]]:
        """Move to ``target`` seconds, keeping play or pause. (whether a new session was
        started, the capture events met)."""
        target = max(0.0, min(target, self.total))
        restarted = target < self.at
        if restarted:
            self._reset(max(0.0, target - LEAD_S))
            self.at = 0.0
        playing = self.playing
        captures = self.advance(target)
        self.playing = playing and not self.ended
        return restarted, captures

    def toggle(self) -> None:
        self.playing = not self.playing and not self.ended

    def change_speed(self, step: int) -> None:
        i = SPEEDS.index(self.speed) + int(step)
        self.speed = SPEEDS[max(0, min(len(SPEEDS) - 1, i))]

    def _compare(self, rec: Record, recomputed: Verdict) -> None:
        recorded = self.player.recorded
        if self.mismatch or recorded is None or same(recomputed, recorded):
            return
        got = recomputed.principal.bound if recomputed.principal else "none"
        was = recorded.principal.bound if recorded.principal else "none"
        self.mismatch = (
            f"at {rec.t - self.start_t:.0f} s the verdict recomputed from the readings "
            f"({got}) differs from the recorded one ({was}): the rules changed since "
            "the recording; the recorded verdict is shown"
        )
