"""A recording's run as the job's memory would keep it: its agents' readings played into a
session (its pace, its job, its settings, its shifts) and its last recorded verdict shown
there, so that two recordings (``gputop compare``) and a recording and a live run
(``diagnose --baseline FILE``) compare by the code that compares a run with the job's last."""

from __future__ import annotations

from dataclasses import dataclass

from gputop.diagnose import Remembered, Shift
from gputop.record.reader import Recording
from gputop.session import Session


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """A recording's run, its shifts, and how far the file could be read."""

    run: Remembered | None
    """None: no agent's steps enough to compare (``diagnose.STEPS_LEAST``) or no job known."""
    shifts: tuple[tuple[Shift, str, float], ...]
    damage: str | None
    """Why reading stopped early, as the recording says (a file cut at its end included)."""


def recorded_run(recording: Recording) -> RecordedRun:
    """Every agents' reading of ``recording`` in order, then its last verdict shown."""
    session = Session(recording.devices, evaluate_each=False)
    last_verdict = None
    for rec in recording.records():
        if rec.kind == "agents":
            session.take("agents", rec.value)
        elif rec.kind == "verdict":
            last_verdict = rec.value
    if last_verdict is not None:
        point, recorded = last_verdict
        session.evaluate(point, lambda v: recorded.as_verdict(()))
    return RecordedRun(session.remembered(), session.state.shifts, recording.damage)
