"""The records of a session file, as JSON values, in both directions (docs/recording.md).

    ["g", [GpuSample...]]                 one reading of every GPU
    ["h", HostSample]                     the process tree
    ["a", t, wall, target, problems, [agent...]]   the agents; steps as a delta (below)
    ["s", StacksSample]                   py-spy stacks (frames by number, see "F")
    ["F", [Frame...]]                     frames first met here, numbered in order per segment
    ["v", point, verdict | 0]             an evaluation; 0: the same verdict as the one before
    ["e", t, wall, kind, data]            captures, the target's exit

An agent is ``[AgentState without steps, steps]`` where steps is ``["all", [StepRecord...]]``
(the first reading of a segment, or after the agent restarted) or ``[drop, changed, added]``:
drop the oldest ``drop`` steps of the previous reading, replace ``changed`` ([position,
StepRecord], GPU times arrive a step late) and append ``added``. Steps are the bulk of a
trainer's data and repeat for 50 readings otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gputop.diagnose.findings import Finding, Verdict
from gputop.diagnose.point import EvalPoint
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.record.codec import MAX_INT, CodecError, Decoder, Schema

_AGENT_FIELDS = tuple(f.name for f in dataclasses.fields(AgentState) if f.name != "steps")


def steps_delta(prev: Sequence[StepRecord] | None, cur: Sequence[StepRecord]) -> Any:
    """How ``cur`` differs from ``prev`` (see the module doc); None for "unchanged"."""
    if prev is None or not cur:
        return ["all", list(cur)]
    if prev and prev[0].step <= cur[0].step:
        drop = next((i for i, s in enumerate(prev) if s.step == cur[0].step), None)
    else:
        drop = 0 if not prev else None
    if drop is None:
        return ["all", list(cur)]
    kept = prev[drop:]
    if len(kept) > len(cur) or any(a.step != b.step for a, b in zip(kept, cur, strict=False)):
        return ["all", list(cur)]
    changed = [[i, b] for i, (a, b) in enumerate(zip(kept, cur, strict=False)) if a != b]
    added = list(cur[len(kept) :])
    return [drop, changed, added]


def apply_steps(prev: tuple[StepRecord, ...] | None, delta: Any, dec: Decoder) -> tuple:
    if not isinstance(delta, list) or len(delta) not in (2, 3):
        raise CodecError("a steps delta has the wrong shape")
    if delta[0] == "all":
        return tuple(_steps(delta[1], dec))
    drop, changed, added = delta
    if prev is None or type(drop) is not int or not 0 <= drop <= len(prev):
        raise CodecError("a steps delta refers to steps the file does not have")
    out = list(prev[drop:])
    if not isinstance(changed, list):
        raise CodecError("a steps delta has the wrong shape")
    for item in changed:
        if not isinstance(item, list) or len(item) != 2 or type(item[0]) is not int:
            raise CodecError("a steps delta has the wrong shape")
        if not 0 <= item[0] < len(out):
            raise CodecError("a steps delta changes a step that is not there")
        if isinstance(item[1], dict):  # only the fields that changed, by name
            fields = dec.fields(StepRecord, item[1])
            out[item[0]] = dataclasses.replace(out[item[0]], **fields)
        else:
            out[item[0]] = dec.record(StepRecord, item[1])
    out.extend(_steps(added, dec))
    return tuple(out)


def _steps(raw: Any, dec: Decoder) -> list[StepRecord]:
    if not isinstance(raw, list):
        raise CodecError("a list of steps was expected")
    return [dec.record(StepRecord, s) for s in _unruns(raw, dec.names[StepRecord])]


class AgentsEncoder:
    """Remembers each agent's previous steps, per segment."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.prev: dict[int, tuple[StepRecord, ...]] = {}

    def reset(self) -> None:
        self.prev.clear()

    def encode(self, sample: AgentsSample) -> list[Any]:
        agents = []
        for a in sample.agents:
            prev = self.prev.get(a.pid)
            delta = steps_delta(prev, a.steps)
            self.prev[a.pid] = a.steps
            head = self.schema.encode(dataclasses.replace(a, steps=()))
            agents.append([head, _enc_steps(delta, self.schema, prev)])
        return ["a", sample.t, sample.wall, sample.target, list(sample.problems), agents]


_STEP = {n: i for i, n in enumerate(f.name for f in dataclasses.fields(StepRecord))}
_N, _T0, _DUR = _STEP["step"], _STEP["t0_ns"], _STEP["dur_ns"]


def _runs(encoded: list[list[Any]]) -> list[list[Any]]:
    """Consecutive steps as differences: the step number from the one before, the start from
    the end of the one before (a few digits instead of nineteen: steps are most of a file)."""
    out = [list(e) for e in encoded]
    for prev, cur, new in zip(encoded, encoded[1:], out[1:], strict=False):
        new[_N] = cur[_N] - prev[_N]
        new[_T0] = cur[_T0] - (prev[_T0] + prev[_DUR])
    return out


def _unruns(raw: list[Any], names: Sequence[str]) -> list[Any]:
    try:
        n_, t0_, dur_ = names.index("step"), names.index("t0_ns"), names.index("dur_ns")
    except ValueError:
        raise CodecError("the file's steps lack step, t0_ns or dur_ns") from None
    out = []
    for i, e in enumerate(raw):
        if not isinstance(e, list) or len(e) <= max(n_, t0_, dur_):
            raise CodecError("a step has the wrong shape")
        if i:
            prev = out[-1]
            if not all(type(x) is int for x in (e[n_], e[t0_], prev[n_], prev[t0_], prev[dur_])):
                raise CodecError("a step has the wrong shape")
            e = list(e)
            e[n_] += prev[n_]
            e[t0_] += prev[t0_] + prev[dur_]
        out.append(e)
    return out


def _enc_steps(delta: Any, schema: Schema, prev: Sequence[StepRecord] | None = None) -> Any:
    if delta[0] == "all":
        return ["all", _runs([schema.encode(s) for s in delta[1]])]
    drop, changed, added = delta
    added_enc = _runs([schema.encode(s) for s in added])
    kept = prev[drop:] if prev is not None else None
    out = []
    for i, s in changed:
        if kept is None:
            out.append([i, schema.encode(s)])
        else:  # usually GPU times that arrived a step late: those fields only
            out.append([i, schema.changed_fields(kept[i], s)])
    return [drop, out, added_enc]


class AgentsDecoder:
    """The reading side of AgentsEncoder: each agent's previous steps, per segment, for the deltas
    to apply to."""

    def __init__(self, dec: Decoder) -> None:
        self.dec = dec
        self.prev: dict[int, tuple[StepRecord, ...]] = {}

    def reset(self) -> None:
        self.prev.clear()

    def decode(self, rec: list[Any]) -> AgentsSample:
        if len(rec) != 6 or not isinstance(rec[4], list) or not isinstance(rec[5], list):
            raise CodecError("an agents record has the wrong shape")
        _, t, wall, target, problems, raw_agents = rec
        agents = []
        for item in raw_agents:
            if not isinstance(item, list) or len(item) != 2:
                raise CodecError("an agent has the wrong shape")
            head = self.dec.record(AgentState, item[0])
            steps = apply_steps(self.prev.get(head.pid), item[1], self.dec)
            self.prev[head.pid] = steps
            agents.append(dataclasses.replace(head, steps=steps))
        if not _number(t) or not _number(wall) or type(target) is not int:
            raise CodecError("an agents record has the wrong shape")
        if not all(isinstance(p, str) for p in problems):
            raise CodecError("an agents record has the wrong shape")
        return AgentsSample(target, t, wall, tuple(agents), tuple(problems))


def _number(v: Any) -> bool:
    return type(v) is float or (type(v) is int and -MAX_INT <= v <= MAX_INT)


# ---- verdicts ----


@dataclass(frozen=True, slots=True)
class RecordedVerdict:
    """What the screen showed: the principal in full, the others by bound and confidence."""

    principal: Finding | None
    secondary: tuple[tuple[str, float, str], ...]
    since: float | None
    note: str
    inputs: tuple[str, ...]

    @classmethod
    def of(cls, v: Verdict) -> RecordedVerdict:
        return cls(
            v.principal,
            tuple((f.bound, f.confidence, f.summary) for f in v.secondary),
            v.since,
            v.note,
            v.inputs,
        )

    def as_verdict(self, findings: tuple[Finding, ...] = ()) -> Verdict:
        """A Verdict for the panes (secondary findings carry what was recorded of them)."""
        secondary = tuple(Finding(b, True, c, s) for b, c, s in self.secondary)
        return Verdict(self.principal, secondary, findings, self.since, self.note, self.inputs)


def encode_verdict(r: RecordedVerdict, schema: Schema) -> list[Any]:
    p = schema.encode(r.principal) if r.principal is not None else None
    return [p, [list(s) for s in r.secondary], r.since, r.note, list(r.inputs)]


def decode_verdict(raw: Any, dec: Decoder) -> RecordedVerdict:
    if not isinstance(raw, list) or len(raw) != 5:
        raise CodecError("a verdict has the wrong shape")
    p, secondary, since, note, inputs = raw
    principal = dec.record(Finding, p) if p is not None else None
    if not isinstance(secondary, list) or not isinstance(inputs, list):
        raise CodecError("a verdict has the wrong shape")
    sec = []
    for s in secondary:
        if not (isinstance(s, list) and len(s) == 3 and isinstance(s[0], str) and _number(s[1])):
            raise CodecError("a secondary finding has the wrong shape")
        sec.append((s[0], s[1], str(s[2])))
    if (since is not None and not _number(since)) or not isinstance(note, str):
        raise CodecError("a verdict has the wrong shape")
    return RecordedVerdict(principal, tuple(sec), since, note, tuple(str(i) for i in inputs))


def encode_point(p: EvalPoint) -> list[Any]:
    host = [list(p.host[0]), p.host[1]] if p.host is not None else None
    stacks = [list(p.stacks[0]), p.stacks[1]] if p.stacks is not None else None
    return [p.now, host, stacks]


def decode_point(raw: Any) -> EvalPoint:
    if not isinstance(raw, list) or len(raw) != 3 or not _number(raw[0]):
        raise CodecError("an evaluation point has the wrong shape")
    return EvalPoint(raw[0], _end(raw[1]), _end(raw[2]))


def _end(raw: Any) -> tuple | None:
    if raw is None:
        return None
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not isinstance(raw[0], list)
        or len(raw[0]) != 2
        or not isinstance(raw[0][0], str)
        or type(raw[0][1]) is not int  # a pid: ("host", pid), ("stacks", pid)
        or not _number(raw[1])
    ):
        raise CodecError("an evaluation point has the wrong shape")
    return ((raw[0][0], raw[0][1]), raw[1])
