"""The records of a session file, as JSON values, in both directions (docs/recording.md).

    ["g", [GpuSample...]]                 one reading of every GPU
    ["h", HostSample]                     the process tree
    ["a", t, wall, target, problems, [agent...]]   the agents; steps as a delta (below)
    ["s", StacksSample]                   py-spy stacks (frames by number, see "F")
    ["F", [Frame...]]                     frames first met here, numbered in order per segment
    ["v", point, verdict | 0]             an evaluation; 0: the same verdict as the one before
                                          (a verdict's 6th item: the step-time budget)
    ["e", t, wall, kind, data]            captures, the target's exit, shifts of step time

An agent is ``[AgentState without steps, steps]`` where steps is ``["all", [StepRecord...]]``
(the first reading of a segment, or after the agent restarted) or ``[drop, changed, added]``:
drop the oldest ``drop`` steps of the previous reading, replace ``changed`` ([position,
StepRecord], GPU times arrive a step late) and append ``added``. Steps are the bulk of a
trainer's data and repeat for 50 readings otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gputop.diagnose import EvalPoint, Finding, Verdict, slices_of
from gputop.model.budget import Budget, RankBudget
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.record.codec import MAX_INT, CodecError, Decoder, Schema
from gputop.vocab.budget import SLICES

MAX_RANKS = 4096
"""Ranks a recorded budget may hold (one node's monitor sees its own: far fewer)."""


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
    out: list[Any] = []
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
    budget: Budget | None = None
    """The step-time budget the verdict was named from, its shares to four decimals (what
    every output shows is whole percents); None in files from before the budget."""

    @classmethod
    def of(cls, v: Verdict) -> RecordedVerdict:
        return cls(
            v.principal,
            tuple((f.bound, f.confidence, f.summary) for f in v.secondary),
            v.since,
            v.note,
            v.inputs,
            _kept(v.budget) if v.budget is not None else None,
        )

    def as_verdict(self, findings: tuple[Finding, ...] = ()) -> Verdict:
        """A Verdict for the panes (secondary findings carry what was recorded of them)."""
        secondary = tuple(Finding(b, True, c, s) for b, c, s in self.secondary)
        return Verdict(
            self.principal, secondary, findings, self.since, self.note, self.inputs, self.budget
        )


def _r(x: float) -> float:
    """A share to four decimals, held to [0, 1]: what the reader takes back."""
    return round(min(1.0, max(0.0, x)), 4) if x == x else 0.0


def _kept(b: Budget) -> Budget:
    """What a recording keeps of a budget: every rank's shares and the typical rank's sources'
    measures, to four decimals; other ranks' own measures are left out."""
    typical = b.ranks.index(b.typical) if b.typical in b.ranks else 0
    ranks = tuple(
        RankBudget(
            r.pid, r.rank, r.source, {n: _r(r.shares.get(n, 0.0)) for n in SLICES},
            round(r.seconds, 4), r.steps, r.samples,
            {src: {n: _r(v) for n, v in est.items()} for src, est in r.estimates.items()}
            if i == typical else {}, {n: _r(v) for n, v in r.errors.items()},
            {n: _r(v) for n, v in r.spreads.items() if v},
        )
        for i, r in enumerate(b.ranks)
    )  # fmt: skip
    held = {x.name: x.corroborated for x in b.slices}
    return budget_from(ranks, typical, held)


def budget_from(
    ranks: tuple[RankBudget, ...], typical: int, held: dict[str, tuple[str, ...]]
) -> Budget:
    return Budget(slices_of(ranks[typical], held), ranks, ranks[typical])


SOURCES = ("agent", "stacks", "NVML")


def encode_budget(b: Budget) -> list[Any]:
    typical = b.ranks.index(b.typical)
    ranks = [
        [r.rank, r.pid, r.source, r.seconds, r.steps, r.samples, [r.shares[n] for n in SLICES],
         *([dict(r.errors), dict(r.spreads)] if r.spreads else [dict(r.errors)] if r.errors
           else [])]
        for r in b.ranks
    ]  # fmt: skip
    estimates = {src: [est.get(n) for n in SLICES] for src, est in b.typical.estimates.items()}
    held = [[x.name, list(x.corroborated)] for x in b.slices if x.corroborated]
    return [typical, ranks, estimates, held]


def _share(v: Any) -> bool:
    return _number(v) and 0 <= v <= 1


def decode_budget(raw: Any) -> Budget:
    bad = CodecError("a budget has the wrong shape")
    if not isinstance(raw, list) or len(raw) != 4:
        raise bad
    typical, ranks_raw, estimates_raw, held_raw = raw
    if not isinstance(ranks_raw, list) or not 0 < len(ranks_raw) <= MAX_RANKS:
        raise bad
    if type(typical) is not int or not 0 <= typical < len(ranks_raw):
        raise bad
    ranks = []
    for r in ranks_raw:
        if not isinstance(r, list) or len(r) not in (7, 8, 9):
            raise bad
        rank, pid, source, seconds, steps, samples, shares = r[:7]
        errors, spreads = (*r[7:], {}, {})[:2]  # older recordings: none
        if (
            not (rank is None or (type(rank) is int and 0 <= rank <= MAX_INT))
            or type(pid) is not int
            or source not in SOURCES[:2]
            or not (_number(seconds) and 0 <= seconds < MAX_INT)
            or not all(type(n) is int and 0 <= n <= MAX_INT for n in (steps, samples))
            or not isinstance(shares, list)
            or len(shares) != len(SLICES)
            or not all(_share(v) for v in shares)
            or not all(
                isinstance(m, dict) and all(n in SLICES and _share(v) for n, v in m.items())
                for m in (errors, spreads)
            )
        ):
            raise bad
        ranks.append(RankBudget(pid, rank, source, dict(zip(SLICES, shares, strict=True)),
                                seconds, steps, samples, {}, errors, spreads))  # fmt: skip
    if not isinstance(estimates_raw, dict) or not set(estimates_raw) <= set(SOURCES):
        raise bad
    estimates = {}
    for src, values in estimates_raw.items():
        if not isinstance(values, list) or len(values) != len(SLICES):
            raise bad
        if not all(v is None or _share(v) for v in values):
            raise bad
        estimates[src] = {n: v for n, v in zip(SLICES, values, strict=True) if v is not None}
    ranks[typical] = replace(ranks[typical], estimates=estimates)
    if not isinstance(held_raw, list):
        raise bad
    held: dict[str, tuple[str, ...]] = {}
    for h in held_raw:
        if (
            not isinstance(h, list) or len(h) != 2 or h[0] not in SLICES
            or not isinstance(h[1], list) or not all(src in SOURCES for src in h[1])
        ):  # fmt: skip
            raise bad
        held[h[0]] = tuple(h[1])
    return budget_from(tuple(ranks), typical, held)


def encode_verdict(r: RecordedVerdict, schema: Schema) -> list[Any]:
    p = schema.encode(r.principal) if r.principal is not None else None
    out = [p, [list(s) for s in r.secondary], r.since, r.note, list(r.inputs)]
    if r.budget is not None:
        out.append(encode_budget(r.budget))
    return out


def decode_verdict(raw: Any, dec: Decoder) -> RecordedVerdict:
    if not isinstance(raw, list) or len(raw) not in (5, 6):  # 5: before the budget
        raise CodecError("a verdict has the wrong shape")
    budget = decode_budget(raw[5]) if len(raw) == 6 else None
    p, secondary, since, note, inputs = raw[:5]
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
    return RecordedVerdict(
        principal, tuple(sec), since, note, tuple(str(i) for i in inputs), budget
    )


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
