"""A minute of a session in a few kilobytes: what `gputop report` needs, so it never decodes
a day of samples. The recorder feeds an Accumulator with every reading and writes ``take()``
each minute; a reader of a recording that ended abruptly feeds the same Accumulator with the
decoded tail (seeded with ``carry`` from the last summary), so both give the same numbers.

Pure: no clock, no I/O. Summaries merge by addition (``merge``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gputop.diagnose import BudgetBins, EvalPoint, Verdict
from gputop.model.budget import Budget
from gputop.model.gpu import GpuSample
from gputop.model.host import HostSample
from gputop.model.ranks import MAIN_RANK, RankTotals, StepCounter
from gputop.model.step_stats import work_ns
from gputop.model.steps import AgentsSample, StepCursor, StepRecord
from gputop.model.throttle import ThrottleClock
from gputop.snapshot import jsonable

BUCKET = math.log(1.02)
"""Step times are kept as a histogram of 2 % wide buckets: a day of steps in a few hundred
numbers, medians within 1 %."""


POINT_S = 10.0
"""Chart resolution: one point per 10 s (8,640 a day), additive so minutes merge."""


def _cursors(m: Any) -> dict[int, StepCursor]:
    """Step cursors from a file's carry (pid as text -> [step, t0_ns]), others dropped."""
    if not isinstance(m, dict):
        return {}
    return {
        int(k): (v[0], v[1])
        for k, v in m.items()
        if isinstance(k, str) and len(k) < 20 and k.isascii() and k.isdigit()
        and isinstance(v, list | tuple) and len(v) == 2 and all(type(x) is int for x in v)
    }  # fmt: skip


def _held(t: Any, reasons: Any) -> dict[int, tuple[float, tuple[str, ...]]]:
    """The throttle clock's last reading per GPU from a file's carry: ``gpu_t`` (GPU as text
    -> time) and ``gpu_reasons`` (GPU as text -> the reasons it showed). A file older than
    ``gpu_reasons`` holds no reasons over its first interval."""
    times, reasons = _typed(t, (int, float)), reasons if isinstance(reasons, dict) else {}
    out = {}
    for k, v in times.items():
        if _real(v) and len(k) < 20 and k.isascii() and k.removeprefix("-").isdigit():
            r = reasons.get(k)
            ok = isinstance(r, list) and all(isinstance(x, str) for x in r)
            out[int(k)] = (float(v), tuple(r) if ok else ())
    return out


def _real(v: Any) -> bool:
    """A time from a file that arithmetic with floats survives (10**400 reads as JSON)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and abs(v) < 1e300


def _typed(m: Any, kind: type | tuple[type, ...]) -> dict[str, Any]:
    if not isinstance(m, dict):
        return {}
    return {k: v for k, v in m.items() if isinstance(v, kind) and not isinstance(v, bool)}


def bucket_of(seconds: float) -> int:
    return round(math.log(max(seconds, 1e-6)) / BUCKET)


def bucket_value(b: int) -> float:
    return math.exp(b * BUCKET)


MAX_BUCKET = bucket_of(1e300)
"""The largest bucket a reader accepts: ``bucket_value`` of anything beyond overflows."""


class _RankMinute:
    """One rank's steps in a minute: the model's totals plus the histograms the report's
    medians come from."""

    def __init__(self) -> None:
        self.totals = RankTotals()
        self.hist: dict[str, int] = {}
        self.work_hist: dict[str, int] = {}
        """Work time (step minus grad_sync wait) per step, same buckets: the report compares
        ranks by median work, as the straggler definition (model/ranks.py) does."""
        self.fingerprint: Any = None

    def add(self, s: StepRecord) -> None:
        self.totals.add(s)
        for hist, seconds in ((self.hist, s.dur_ns / 1e9), (self.work_hist, work_ns(s) / 1e9)):
            b = str(bucket_of(seconds))
            hist[b] = hist.get(b, 0) + 1

    def summary(self) -> dict[str, Any]:
        t = self.totals
        out = {
            "steps": t.steps,
            "seconds": t.seconds,
            "hist": self.hist,
            "work_hist": self.work_hist,
            "phases": t.phases,
            "flops": t.flops,
            "flops_s": t.flops_s,
            "samples": t.samples or 0,
            "tokens": t.tokens or 0,
        }
        if self.fingerprint is not None:
            out["fingerprint"] = self.fingerprint
        return out


class Accumulator:
    """A minute of a session boiled down to what `gputop report` needs, so a day-long file is
    reported from its summaries without decoding every reading."""

    def __init__(self, carry: dict[str, Any] | None = None) -> None:
        carry = carry if isinstance(carry, dict) else {}  # from a file: kept only where it fits
        self.counter = StepCounter(_cursors(carry.get("last_step")))
        """Each step once, under its rank label (readings repeat hundreds)."""
        self.throttle = ThrottleClock(_held(carry.get("gpu_t"), carry.get("gpu_reasons")))
        at = carry.get("verdict_at")
        self.verdict_at: float | None = at if _real(at) else None
        principal = carry.get("principal")
        self.principal: str | None = principal if isinstance(principal, str) else None
        self.exited: bool = carry.get("exited") is True
        self._fingerprints: dict[int, Any] = {}
        bins = carry.get("bins")  # [open interval's start, {pid: cursor}: then, {...}: now]
        if isinstance(bins, list) and len(bins) == 3 and _real(bins[0]):
            self.bins = BudgetBins(POINT_S, keep=BINS_KEPT, cursors=_cursors(bins[1]),
                                   start=float(bins[0]), counted=_cursors(bins[2]))  # fmt: skip
        else:
            self.bins = BudgetBins(POINT_S, keep=BINS_KEPT,
                                   cursors=_cursors(carry.get("last_step")))  # fmt: skip
        """The job's budget per 10 s (the report's budget over time), from the steps the
        agents' readings bring: an interval's budget is computed once, when it closes."""
        self._binned: float | None = None
        """The start of the last closed interval already put in ``budget_points``."""
        self._reset(None)

    def _reset(self, t: float | None) -> None:
        self.t0 = t
        self.t1 = t
        self.verdict_s: dict[str, float] = {}
        self.budget_s: dict[str, dict[str, float]] = {}
        """Per rank label ("job" for the job's budget), per slice: seconds of wall time, the
        shares the verdict was named from weighted by how long each was shown."""
        self.changes: list[list[Any]] = []
        self.findings: dict[str, Any] = {}
        self.beside: dict[str, Any] = {}
        """Each bound shown beside the principal, as last shown (its cause and levers)."""
        self.secondary: list[list[Any]] = []
        self.ranks: dict[str, _RankMinute] = {}
        self.gpus: dict[str, dict[str, Any]] = {}
        self.throttle_s: dict[str, dict[str, float]] = {}
        """Per clock-event reason, per GPU: seconds it was active."""
        self.events: list[list[Any]] = []
        self.points: dict[str, list[Any]] = {}
        """Per 10-s bin: [step seconds, steps, GPU activity sum, readings, {bound: seconds}]."""
        self.budget_points: dict[str, dict[str, Any]] = {}
        """Per 10-s bin: the job's budget over the steps that ended in it (``budget_point``)."""
        self.gpu_points: dict[str, dict[str, list[Any]]] = {}
        """Per 10-s bin, per GPU: ``GPU_POINT`` sums (means in the report)."""

    def _point(self, t: float) -> list[Any]:
        if not math.isfinite(t):  # a damaged file's time: no bin to put it in
            return [0.0, 0, 0.0, 0, {}]
        key = str(math.floor(t / POINT_S))
        p = self.points.get(key)
        if p is None:
            p = self.points[key] = [0.0, 0, 0.0, 0, {}]
        return p

    def _gpu_point(self, t: float, gpu: str) -> list[Any]:
        if not math.isfinite(t):
            return _new_gpu_point()
        per_gpu = self.gpu_points.setdefault(str(math.floor(t / POINT_S)), {})
        p = per_gpu.get(gpu)
        if p is None:
            p = per_gpu[gpu] = _new_gpu_point()
        return p

    def _bin_budgets(self, sample: AgentsSample) -> None:
        """The intervals ``sample`` closed, each as one ``budget_points`` entry."""
        if not math.isfinite(sample.t):
            return
        self.bins.add(sample)
        for iv in self.bins.closed:
            if self._binned is not None and iv.start <= self._binned:
                continue
            self._binned = iv.start
            if iv.budget is not None:
                key = str(math.floor(iv.start / POINT_S))
                self.budget_points[key] = budget_point(iv.start, iv.budget)

    def _at(self, t: float) -> None:
        if self.t0 is None:
            self.t0 = t
        self.t1 = t if self.t1 is None else max(self.t1, t)

    # ---- readings ----

    def gpu(self, samples: Sequence[GpuSample]) -> None:
        for s in samples:
            self._at(s.t)
            key = str(s.index)
            g = self.gpus.setdefault(key, {"n": 0, "util": 0.0, "sm": 0.0, "power": 0.0,
                                           "n_sm": 0, "temp_max": None})  # fmt: skip
            g["n"] += 1
            g["util"] += s.util_gpu_pct or 0
            g["power"] += s.power_w or 0.0
            if s.sm_active_pct is not None:
                g["sm"] += s.sm_active_pct
                g["n_sm"] += 1
            if s.temp_c is not None:
                g["temp_max"] = max(g["temp_max"] or s.temp_c, s.temp_c)
            act = s.sm_active_pct if s.sm_active_pct is not None else s.util_gpu_pct
            if act is not None:
                p = self._point(s.t)
                p[2] += act
                p[3] += 1
            g_pt = self._gpu_point(s.t, key)
            _sample_into(g_pt, s, act)
            dt, reasons = self.throttle.charge(s)  # the model's rule, as /metrics counts
            held = self._gpu_point(s.t - dt, key)[GPU_HELD] if reasons else {}
            for reason in reasons:
                per_gpu = self.throttle_s.setdefault(reason, {})
                per_gpu[key] = per_gpu.get(key, 0.0) + dt
                held[reason] = held.get(reason, 0.0) + dt  # in the bin the reading began

    def host(self, sample: HostSample) -> None:
        self._at(sample.t)
        if sample.state == "exited" and not self.exited:
            self.exited = True
            self.events.append([sample.t, sample.wall, "target-exit",
                                {"pid": sample.pid, "exit_code": sample.exit_code}])  # fmt: skip

    def agents(self, sample: AgentsSample) -> None:
        self._at(sample.t)
        self._bin_budgets(sample)
        for rank, a, fresh in self.counter.new(sample):  # the exporter's counting and labels
            r = self.ranks.setdefault(rank, _RankMinute())
            if a.fingerprint and a.fingerprint is not self._fingerprints.get(a.pid):
                self._fingerprints[a.pid] = a.fingerprint
                r.fingerprint = jsonable(a.fingerprint)
            for s in fresh:
                r.add(s)
                if rank == MAIN_RANK:
                    p = self._point(sample.t)
                    p[0] += s.dur_ns / 1e9
                    p[1] += 1

    def verdict(self, point: EvalPoint, v: Verdict) -> None:
        self._at(point.now)
        bound = v.principal.bound if v.principal else None
        if self.verdict_at is not None and 0 <= point.now - self.verdict_at < 60:
            name = self.principal or "none"
            dt = point.now - self.verdict_at
            self.verdict_s[name] = self.verdict_s.get(name, 0.0) + dt
            by = self._point(point.now)[4]
            by[name] = by.get(name, 0.0) + dt
            if v.budget is not None:
                _add(
                    self.budget_s.setdefault(JOB, {}),
                    {x.name: x.share * dt for x in v.budget.slices},
                )
                for r in v.budget.ranks:
                    _add(
                        self.budget_s.setdefault(r.rank_key, {}),
                        {n: x * dt for n, x in r.shares.items()},
                    )
        if bound != self.principal or self.verdict_at is None:
            conf = v.principal.confidence if v.principal else 0.0
            self.changes.append([point.now, bound, conf, v.note])
        self.verdict_at, self.principal = point.now, bound
        if v.principal is not None:
            self.findings[v.principal.bound] = jsonable(v.principal)
        self.secondary = [[f.bound, f.confidence, f.summary] for f in v.secondary]
        for f in v.secondary:
            self.beside[f.bound] = jsonable(f)

    def event(self, t: float, wall: float, kind: str, data: dict[str, Any]) -> None:
        self._at(t)
        self.events.append([t, wall, kind, data])

    # ---- out ----

    def carry(self) -> dict[str, Any]:
        last = self.throttle.last
        return {
            "last_step": {str(pid): list(c) for pid, c in self.counter.cursors.items()},
            "gpu_t": {str(i): t for i, (t, _) in last.items()},
            "gpu_reasons": {str(i): list(reasons) for i, (_, reasons) in last.items()},
            "verdict_at": self.verdict_at,
            "principal": self.principal,
            "exited": self.exited,
            "bins": None if self.bins.open_start is None else [
                self.bins.open_start,
                {str(pid): list(c) for pid, c in self.bins.open_cursors.items()},
                {str(pid): list(c) for pid, c in self.bins.counted.items()},
            ],
        }  # fmt: skip

    def take(self) -> dict[str, Any]:
        """The summary since the last ``take`` (and what the next one continues from)."""
        out = {
            "t0": self.t0,
            "t1": self.t1,
            "verdict_s": self.verdict_s,
            "budget_s": self.budget_s,
            "changes": self.changes,
            "findings": self.findings,
            "beside": self.beside,
            "secondary": self.secondary,
            "ranks": {rank: r.summary() for rank, r in self.ranks.items()},
            "gpus": self.gpus,
            "throttle_s": self.throttle_s,
            "events": self.events,
            "points": self.points,
            "budget_points": self.budget_points,
            "gpu_points": {
                k: {g: _rounded(p) for g, p in v.items()} for k, v in self.gpu_points.items()
            },
            "carry": self.carry(),
        }
        self._reset(None)
        return out


def merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The whole session from its minutes; ``minutes`` keeps each minute's chart points."""
    out: dict[str, Any] = {"verdict_s": {}, "budget_s": {}, "changes": [], "findings": {},
                           "beside": {},
                           "secondary": [], "ranks": {}, "gpus": {}, "throttle_s": {}, "events": [],
                           "points": {}, "budget_points": {}, "gpu_points": {}, "t0": None,
                           "t1": None}  # fmt: skip
    for p in parts:
        if p.get("t0") is None:
            continue
        out["t0"] = p["t0"] if out["t0"] is None else min(out["t0"], p["t0"])
        out["t1"] = p["t1"] if out["t1"] is None else max(out["t1"], p["t1"])
        _add(out["verdict_s"], p["verdict_s"])
        for label, slices in p.get("budget_s", {}).items():  # minutes before the budget: none
            _add(out["budget_s"].setdefault(label, {}), slices)
        for reason, per_gpu in p["throttle_s"].items():
            _add(out["throttle_s"].setdefault(reason, {}), per_gpu)
        out["changes"] += p["changes"]
        out["events"] += p["events"]
        out["findings"].update(p["findings"])
        out["beside"].update(p.get("beside", {}))  # minutes before it: none
        if p["secondary"] or p["changes"] or p["verdict_s"]:
            out["secondary"] = p["secondary"]
        for rank, r in p["ranks"].items():
            into = out["ranks"].setdefault(rank, {"steps": 0, "seconds": 0.0, "hist": {},
                                                  "work_hist": {}, "phases": {}, "flops": 0.0,
                                                  "flops_s": 0.0, "samples": 0,
                                                  "tokens": 0})  # fmt: skip
            for k in ("steps", "seconds", "flops", "flops_s", "samples", "tokens"):
                into[k] += r[k]
            _add(into["hist"], r["hist"])
            _add(into["phases"], r["phases"])
            if isinstance(into["work_hist"], dict) and isinstance(r.get("work_hist"), dict):
                _add(into["work_hist"], r["work_hist"])
            elif r["steps"]:  # a minute written before work_hist: no median of work
                into["work_hist"] = None
            if "fingerprint" in r:
                into["fingerprint"] = r["fingerprint"]
        for gpu, g in p["gpus"].items():
            into = out["gpus"].setdefault(gpu, {"n": 0, "util": 0.0, "sm": 0.0, "power": 0.0,
                                                "n_sm": 0, "temp_max": None})  # fmt: skip
            for k in ("n", "util", "sm", "power", "n_sm"):
                into[k] += g[k]
            hottest = g.get("temp_max")  # the reader lets a hand-made minute leave it out
            if hottest is not None:
                into["temp_max"] = max(into["temp_max"] or hottest, hottest)
        for key, pt in p.get("points", {}).items():
            into = out["points"].setdefault(key, [0.0, 0, 0.0, 0, {}])
            for i in range(4):
                into[i] += pt[i]
            _add(into[4], pt[4])
        out["budget_points"].update(p.get("budget_points", {}))  # each interval closes once
        for key, per_gpu in p.get("gpu_points", {}).items():
            into_gpus = out["gpu_points"].setdefault(key, {})
            for gpu, pt in per_gpu.items():
                _merge_gpu_point(into_gpus.setdefault(gpu, _new_gpu_point()), pt)
    return out


BINS_KEPT = 4
"""Closed intervals BudgetBins keeps: each is put in ``budget_points`` as it closes."""

GPU_POINT = ("n", "act", "n_act", "clock", "n_clock", "power", "n_power", "limit", "held")
"""A GPU's 10-s bin: readings; SM active (else util) sum and count; SM clock sum and count;
power sum and count; the highest enforced power limit; {clock-event reason: seconds held}."""
GPU_HELD = GPU_POINT.index("held")
GPU_LIMIT = GPU_POINT.index("limit")


def _new_gpu_point() -> list[Any]:
    return [0, 0.0, 0, 0.0, 0, 0.0, 0, 0.0, {}]


def _sample_into(p: list[Any], s: GpuSample, act: float | None) -> None:
    p[0] += 1
    for i, v in ((1, act), (3, s.sm_clock_mhz), (5, s.power_w)):
        if v is not None:
            p[i] += v
            p[i + 1] += 1
    if s.power_limit_w is not None:
        p[GPU_LIMIT] = max(p[GPU_LIMIT], s.power_limit_w)


def _merge_gpu_point(into: list[Any], p: list[Any]) -> None:
    for i in range(GPU_LIMIT):
        into[i] += p[i]
    into[GPU_LIMIT] = max(into[GPU_LIMIT], p[GPU_LIMIT])
    _add(into[GPU_HELD], p[GPU_HELD])


def _rounded(p: list[Any]) -> list[Any]:
    """A bin's sums to a tenth (what a chart shows), so a summary stays small."""
    held = {k: round(v, 2) for k, v in p[GPU_HELD].items()}
    return [round(x, 1) if isinstance(x, float) else x for x in p[:GPU_HELD]] + [held]


def budget_point(start: float, b: Budget) -> dict[str, Any]:
    """One interval's budget as a summary keeps it: where it began, its typical rank (the
    job's budget) and each rank's seconds, steps and non-zero shares."""
    return {
        "start": round(start, 3),
        "typical": b.typical.rank_key,
        "ranks": {
            r.rank_key: [
                round(r.seconds, 3),
                r.steps,
                {k: round(v, 4) for k, v in r.shares.items() if v >= 5e-5},
            ]
            for r in b.ranks
        },
    }


JOB = "job"
"""``budget_s``'s key for the job's budget (the others are rank labels)."""


def budget_shares(seconds: dict[str, float]) -> dict[str, float]:
    """A budget's share-seconds back to shares of the time they cover."""
    usable = {k: v for k, v in seconds.items() if math.isfinite(v) and 0 <= v < 1e12}
    total = sum(usable.values())  # a crafted file's far-off numbers are left out
    return {k: v / total for k, v in usable.items()} if total > 0 else {}


def _add(into: dict[str, Any], more: dict[str, Any]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def chart_points(points: dict[str, list[Any]]) -> list[tuple[float, Any, Any, Any]]:
    """(bin start, mean step s, mean GPU activity %, the verdict held longest) per 10 s."""
    out = []
    for key in sorted(points, key=int):
        step_s, steps, act, n, by = points[key]
        top = max(by.items(), key=lambda kv: kv[1])[0] if by else None
        out.append((int(key) * POINT_S, step_s / steps if steps else None,
                    act / n if n else None, top))  # fmt: skip
    return out


def quantile_of(hist: dict[str, int], q: float) -> float | None:
    items = sorted((int(b), n) for b, n in hist.items())
    total = sum(n for _, n in items)
    if not total:
        return None
    seen = 0
    for b, n in items:
        seen += n
        if seen >= q * total:
            return bucket_value(b)
    return bucket_value(items[-1][0])
