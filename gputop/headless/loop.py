"""`gputop diagnose` and `gputop record` without a screen: one thread reads every source on the
schedule the TUI's samplers keep (``sources.feeds``) into the same ``Session`` and notes what
the verdict said over time (``Diagnosis``); ``document`` and ``text`` say it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputop.arm.armed import Armed, ArmEvent
from gputop.diagnose import Change, Comparison, RunSummary, Shift, Verdict
from gputop.model.step_stats import Mfu
from gputop.session import EVALUATE_SHARE, Session, SessionState
from gputop.sources.feeds import Feed
from gputop.sources.watchdog import SourceStalled, Watchdog


@dataclass
class Diagnosis:
    """What a run without a screen found: the bound over time and the last verdict, to report."""

    started: float
    timeline: list[dict[str, Any]] = field(default_factory=list)
    verdict: Verdict | None = None
    problems: list[str] = field(default_factory=list)
    exit_code: int | None = None
    mfu: Mfu | None = None
    """The latest MFU of the main rank (None: no agent steps to compute it over)."""
    fingerprint: Mapping[str, object] | None = None
    """The main rank's latest fingerprint: the job's setup (``model/setup.setup_of``), made
    into a document once, at the end."""
    label: str | None = None
    """What the timeline's last line shows (``Verdict.label``)."""
    denied: set[str] = field(default_factory=set)
    """What of the target's /proc could not be read (another user's process): said once."""
    target_exit: dict[str, Any] | None = None
    """When the attached process ended during the run: t_s, pid, exit_code (None: unknown,
    a process gputop did not start)."""
    shifts: tuple[tuple[Shift, str, float], ...] = ()
    """Shifts of step time inside the run, each with its rank's label."""
    run: RunSummary | None = None
    comparison: Comparison | None = None
    """This run against the job's last (its memory, or ``--baseline``)."""
    shift_change: Change | None = None
    """The latest shift's rank since it against before it."""
    armed: list[ArmEvent] = field(default_factory=list)
    """What armed captures did (``--arm``), oldest first."""
    exit_on: str | None = None
    """The ``--exit-on`` trigger that fired: the run ends once its captures are written."""


EXIT_WAIT_S = 120.0
"""After an ``--exit-on`` trigger fired, how long the run waits for its captures at most."""


def diagnose(
    session: Session,
    sources: Sequence[Feed],
    duration: float = 30.0,
    stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[Diagnosis, float], None] | None = None,
    armed: Armed | None = None,
    exit_on: frozenset[str] = frozenset(),
) -> Diagnosis:
    """Read every source on its schedule (``sources.feeds``) into ``session`` until
    ``duration`` passes, ``stop()`` is true or the target has exited (the verdict then says
    why it ended, and no later reading can change that); the verdict timeline is noted as it
    changes.
    ``progress(diagnosis, seconds so far)`` after each round of readings (``Feedback``);
    ``armed``: armed captures, shown each evaluated state; ``exit_on``: the triggers that end
    the run once their captures are written (or EXIT_WAIT_S has passed)."""
    out = Diagnosis(started=clock())
    fired_at: float | None = None
    if session.evaluate_share is None:
        session.evaluate_share = EVALUATE_SHARE
    due = {f.kind: out.started for f in sources}
    # each read on a worker thread with the feed's deadline, as the screen's samplers do: a
    # wedged driver costs one timeout, then its reads fail fast while the others go on, and the
    # main thread stays where SIGINT and the duration can stop the run
    dogs = {f.kind: Watchdog(f.what, timeout=f.timeout) for f in sources}
    try:
        while True:
            now = clock()
            took = []
            for f in sources:
                if now >= due[f.kind]:
                    due[f.kind] = max(due[f.kind] + f.period, now)
                    try:
                        reading = dogs[f.kind].call(f.read)
                    except SourceStalled as e:
                        if str(e) not in out.problems:
                            out.problems.append(str(e))
                        continue
                    session.take(f.kind, reading, evaluate=False)
                    took.append(f.kind)
            if took:  # one evaluation for the readings of a round, not one per reading
                state = session.settle()
                for kind in took:
                    _note(out, state, kind)
                if armed is not None:
                    armed.consider(state)
            if armed is not None:
                _armed_events(out, session, armed, exit_on)
                if out.exit_on is not None and fired_at is None:
                    fired_at = clock()
            if progress is not None:
                progress(out, clock() - out.started)
            done_firing = fired_at is not None and (
                armed is None or not armed.running or clock() - fired_at >= EXIT_WAIT_S
            )
            if clock() - out.started >= duration or stop() or out.target_exit or done_firing:
                if session.unevaluated:  # the last readings, whatever the gap
                    _note(out, session.settle(force=True), "")
                break
            sleep(max(0.0, min(due.values()) - clock()))
    finally:
        for dog in dogs.values():
            dog.close()
        if armed is not None:
            armed.close(wait_s=5.0)  # a capture cut short keeps what it has
            _armed_events(out, session, armed, exit_on)
    if out.denied and session.state.host is not None:
        out.problems.append(
            f"pid {session.state.host.pid}: could not read its {', '.join(sorted(out.denied))} "
            "(another user's process: run gputop as that user or as root)"
        )
    for problem in session.state.problems:
        if problem not in out.problems:
            out.problems.append(problem)
    return out


def _armed_events(out: Diagnosis, session: Session, armed: Armed, exit_on: frozenset[str]) -> None:
    """What armed captures did since the last round: noted, and each a session event (the
    recording and the report list them)."""
    for e in armed.drain():
        out.armed.append(e)
        session.event("armed", e.doc())
        if e.what == "fired" and e.trigger in exit_on and out.exit_on is None:
            out.exit_on = e.trigger


def _note(out: Diagnosis, state: SessionState, kind: str) -> None:
    """The verdict timeline (a line when the principal changes), the main rank's MFU and
    what the stacks source could not do."""
    if kind == "stacks" and state.stacks is not None:
        for problem in (state.stacks.problem, *(p.error for p in state.stacks.processes)):
            if problem and problem not in out.problems:
                out.problems.append(problem)
    host = state.host
    if kind == "host" and host is not None and host.main is not None:
        out.denied.update(host.main.na)
    if kind == "host" and host is not None and host.state == "exited" and not out.target_exit:
        out.target_exit = {"t_s": round(max(0.0, host.t - out.started), 2), "pid": host.pid,
                           "exit_code": host.exit_code}  # fmt: skip
    out.shifts = state.shifts
    verdict = state.verdict
    if verdict is None or state.point is None:
        return
    out.run, out.comparison, out.shift_change = state.run, state.comparison, state.shift_change
    steps = state.inputs.steps if state.inputs is not None else None
    out.mfu = steps.mfu_detail if steps is not None else None
    if steps is not None and steps.fingerprint:
        out.fingerprint = steps.fingerprint
    principal = verdict.principal.bound if verdict.principal else None
    # a line when what is shown changes: a bound, "warming up" (no bound, the note says how far
    # the start is), or no bound
    if not out.timeline or out.label != verdict.label:
        out.timeline.append(
            {
                "t_s": round(max(0.0, state.point.now - out.started), 2),
                "bound": principal,
                "confidence": verdict.principal.confidence if verdict.principal else 0.0,
                "note": verdict.note,
            }
        )
    out.label = verdict.label
    out.verdict = verdict
