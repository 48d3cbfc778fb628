"""`gputop diagnose` and `gputop record`: the session without a screen. One thread reads every
source on the schedule the TUI's samplers keep (``sources.feeds``) into the same ``Session``,
and reports the verdict timeline and the final findings, as text or versioned JSON
(docs/diagnose.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputop import __version__
from gputop.diagnose import Finding, Verdict, saving_text
from gputop.model.setup import setup_of
from gputop.model.step_stats import Mfu
from gputop.render.budget import budget_document, stacked
from gputop.session import EVALUATE_SHARE, Session, SessionState
from gputop.snapshot import jsonable
from gputop.sources.feeds import Feed
from gputop.sources.watchdog import SourceStalled, Watchdog

SCHEMA_VERSION = 1


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


def diagnose(
    session: Session,
    sources: Sequence[Feed],
    duration: float = 30.0,
    stop: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[Diagnosis, float], None] | None = None,
) -> Diagnosis:
    """Read every source on its schedule (``sources.feeds``) into ``session`` until
    ``duration`` passes, ``stop()`` is true or the target has exited (the verdict then says
    why it ended, and no later reading can change that); the verdict timeline is noted as it
    changes.
    ``progress(diagnosis, seconds so far)`` after each round of readings (``Feedback``)."""
    out = Diagnosis(started=clock())
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
            if progress is not None:
                progress(out, clock() - out.started)
            if clock() - out.started >= duration or stop() or out.target_exit:
                if session.unevaluated:  # the last readings, whatever the gap
                    _note(out, session.settle(force=True), "")
                break
            sleep(max(0.0, min(due.values()) - clock()))
    finally:
        for dog in dogs.values():
            dog.close()
    if out.denied and session.state.host is not None:
        out.problems.append(
            f"pid {session.state.host.pid}: could not read its {', '.join(sorted(out.denied))} "
            "(another user's process: run gputop as that user or as root)"
        )
    for problem in session.state.problems:
        if problem not in out.problems:
            out.problems.append(problem)
    return out


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
    verdict = state.verdict
    if verdict is None or state.point is None:
        return
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


def _finding(f: Finding) -> dict[str, Any]:
    return jsonable(f)


def document(d: Diagnosis, source: dict[str, Any]) -> dict[str, Any]:
    v = d.verdict
    return {
        "schema_version": SCHEMA_VERSION,
        "gputop_version": __version__,
        "source": source,
        "exit_code": d.exit_code,
        "target_exit": d.target_exit,
        "timeline": d.timeline,
        "verdict": {
            "principal": _finding(v.principal) if v and v.principal else None,
            "secondary": [_finding(f) for f in v.secondary] if v else [],
            "note": v.note if v else "no reading",
            "inputs": list(v.inputs) if v else [],
            "risks": list(v.risks) if v else [],
            "held_s": round(d.timeline[-1]["t_s"], 2) if d.timeline else None,
        },
        "budget": budget_document(v.budget) if v and v.budget else None,
        "findings": [_finding(f) for f in v.findings] if v else [],
        "problems": d.problems,
        "mfu": jsonable(d.mfu) if d.mfu is not None else None,
        "setup": setup_of(d.fingerprint),
    }


def _saving(x: dict[str, Any]) -> str:
    """A saving of our own document, as every output says it."""
    return saving_text(x["speedup"], x["condition"], x.get("low", 0.0), x.get("high", 0.0))


def _mfu_line(m: dict[str, Any]) -> str:
    peak = f"{round(m['peak_flops'] / 1e12, 1):g} TFLOP/s" if m.get("peak_flops") else "no peak"
    against = f"{m.get('board') or 'unknown board'} {m['precision']} {peak}"
    if m.get("value") is None:
        return f"MFU: not computed: {m.get('note')}"
    # an assumed precision is in the note already, with what the fingerprint lacked
    why = m["note"] if m["precision_assumed"] else f"precision: {m['precision_basis']}"
    if m.get("note") and not m["precision_assumed"]:
        why += f"; {m['note']}"
    return f"MFU {m['value']:.1%} of {against} ({why})"


def _exit_line(ended: dict[str, Any]) -> str:
    status = "" if ended["exit_code"] is None else f" with status {ended['exit_code']}"
    return f"  {ended['t_s']:>7.1f} s  pid {ended['pid']} exited{status}: nothing more to watch"


def _timeline_line(e: dict[str, Any]) -> str:
    label = e["bound"] or (e["note"] or "no bound")
    return f"  {e['t_s']:>7.1f} s  {label}  ({e['confidence']:.0%})"


def render(doc: dict[str, Any], timeline: bool = True) -> str:
    """The text form; ``timeline=False`` when its lines were already printed as they came
    (``Feedback``)."""
    lines = ["gputop diagnose"] if timeline else []
    ended = doc.get("target_exit")
    for e in doc["timeline"] if timeline else ():
        if ended and e["t_s"] >= ended["t_s"]:
            lines.append(_exit_line(ended))
            ended = None
        lines.append(_timeline_line(e))
    if ended and timeline:
        lines.append(_exit_line(ended))
    v = doc["verdict"]
    lines.append("")
    p = v["principal"]
    if p is None:
        lines.append(f"verdict: {v['note']}")
    else:
        lines.append(f"verdict: {p['bound']} ({p['confidence']:.0%}): {p['summary']}")
        if p.get("cause"):
            lines.append(f"  why: {p['cause']['text']}")
        budget = doc.get("budget")
        if budget:
            of = budget["of"]
            lines.append(f"  step: {stacked(of['shares'], 200)}  [{of['source']}]")
            for r in budget["ranks"] if len(budget["ranks"]) > 1 else ():
                label = f"rank {r['rank']}" if r["rank"] is not None else f"pid {r['pid']}"
                lines.append(f"    {label}: {stacked(r['shares'], 200)}")
        for e in p["evidence"]:
            lines.append(f"  {'+' if e['supports'] else '-'} {e['text']} [{e['source']}]")
        savings = list(p.get("lever_savings") or ()) or [p.get("saving")]
        for i, lever in enumerate(p["levers"]):
            saving = savings[i] if i < len(savings) else None
            gain = f"  ({_saving(saving)})" if saving else ""
            lines.append(f"  try: {lever}{gain}")
    for risk in v.get("risks") or ():
        lines.append(f"risk: {risk}")
    for f in v["secondary"]:
        lines.append(f"also: {f['bound']} ({f['confidence']:.0%}): {f['summary']}")
        if f.get("cause"):
            lines.append(f"  why: {f['cause']['text']}")
            lines += [f"  try: {lever}" for lever in f["levers"][:1]]
    lines.append(f"inputs: {', '.join(v['inputs']) or 'none'}")
    if doc.get("mfu"):
        lines.append(_mfu_line(doc["mfu"]))
    for problem in doc["problems"]:
        lines.append(f"note: {problem}")
    if doc["exit_code"] is not None:
        lines.append(f"the command exited with status {doc['exit_code']}")
    return "\n".join(lines) + "\n"


class Feedback:
    """What a long diagnosis says while it runs, so a user is not left with a silent terminal:
    on a terminal, the timeline lines as the verdict changes (then the findings at the end, not
    the timeline again); with --json or a redirected stdout, a progress line on stderr when
    that is a terminal (redrawn in place, erased at the end). Nothing on a pipe: the output
    a script reads is unchanged."""

    def __init__(self, out: Any, err: Any, duration: float, json_out: bool) -> None:
        self.out, self.err = out, err
        self.duration = duration
        self.stream = not json_out and _tty(out)
        """Timeline lines go to stdout as they come."""
        self.line = not self.stream and _tty(err)
        """A progress line on stderr."""
        self._printed = 0
        self._exit_said = False
        self._width = 0

    def start(self, what: str) -> None:
        """One line saying what is watched and for how long (stderr)."""
        print(f"gputop: {what}", file=self.err, flush=True)
        if self.stream:
            print("gputop diagnose", file=self.out, flush=True)

    def __call__(self, d: Diagnosis, elapsed: float) -> None:
        if self.stream:
            for e in d.timeline[self._printed :]:
                if d.target_exit and not self._exit_said and e["t_s"] >= d.target_exit["t_s"]:
                    self._say_exit(d)
                print(_timeline_line(e), file=self.out, flush=True)
            self._printed = len(d.timeline)
            if d.target_exit and not self._exit_said:
                self._say_exit(d)
        elif self.line:
            label = d.label or "starting"
            of = f"/{self.duration:g}" if self.duration != float("inf") else ""
            text = f"gputop: {elapsed:.0f}{of} s  {label}"[:79]
            self.err.write("\r" + text.ljust(self._width))
            self.err.flush()
            self._width = len(text)

    def end(self) -> None:
        if self.line and self._width:
            self.err.write("\r" + " " * self._width + "\r")
            self.err.flush()

    def _say_exit(self, d: Diagnosis) -> None:
        assert d.target_exit is not None
        print(_exit_line(d.target_exit), file=self.out, flush=True)
        self._exit_said = True


def _tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
