"""`gputop report FILE`: a recording summarised for a terminal or a ticket (docs/report.md).

Built from the minute summaries only (reader.summaries), so a day-long recording reports in
seconds. The JSON document is versioned (``SCHEMA_VERSION``: changes when a field is renamed,
removed or changes meaning; new fields do not change it).
"""

from __future__ import annotations

import datetime as dt
import math
import shlex
from typing import Any

from gputop import __version__
from gputop.diagnose import Mean, Shift
from gputop.model.durations import duration_text
from gputop.model.ranks import MAIN_RANK, MIN_STEPS, RankRow, compare_ranks
from gputop.model.shown import printable
from gputop.model.step_stats import mfu_of
from gputop.model.steps import StepRecord
from gputop.record.reader import Recording
from gputop.record.summary import (
    JOB,
    POINT_S,
    bucket_value,
    budget_shares,
    chart_points,
    merge,
    quantile_of,
)
from gputop.render.armed import FIELD_MAX, event_text
from gputop.render.budget import stacked
from gputop.render.compare import grouped, shift_docs, shift_line
from gputop.render.verdict import said_lines, said_of_entry, saving_of_json
from gputop.snapshot import jsonable
from gputop.vocab.budget import SLICES

SCHEMA_VERSION = 1
ARMED_LISTED = 200
"""Armed captures' events a report lists at most (the rate limits keep a run far below)."""
ARMED_FIELDS = ("trigger", "what", "why", "kind", "folder")


def build_report(recording: Recording) -> dict[str, Any]:
    parts = recording.summaries()
    s = merge(parts)
    t0 = s["t0"] if s["t0"] is not None else recording.t0
    duration = (s["t1"] - t0) if s["t1"] is not None else 0.0
    names = [d.name for d in recording.devices if d.name]
    session = recording.session
    created = recording.header.get("created_wall")
    verdict_total = sum(s["verdict_s"].values()) or 1.0
    ranks = sorted(s["ranks"].items(), key=_num)
    rows, straggler = _straggler(ranks, [_rank(rank, r, names) for rank, r in ranks])
    return {
        "schema": "gputop.report",
        "schema_version": SCHEMA_VERSION,
        "gputop_version": __version__,
        "recording": {
            "path": str(recording.path),
            "recorded_by": recording.header.get("gputop_version"),
            "hostname": recording.header.get("hostname"),
            "started": _iso(created) if isinstance(created, int | float) else None,
            "duration_s": round(duration, 1),
            "mode": session.get("mode"),
            "pid": session.get("pid"),
            "command": session.get("command"),
            "simulated": session.get("simulated"),
            "gpus": names,
            "damage": recording.damage,
        },
        "budget": {
            label: {k: round(v, 4) for k, v in budget_shares(seconds).items()}
            for label, seconds in sorted(s["budget_s"].items())
            if budget_shares(seconds)
        },
        "verdicts": [
            {"bound": b, "seconds": round(sec, 1), "share": round(sec / verdict_total, 4)}
            for b, sec in sorted(s["verdict_s"].items(), key=lambda kv: -kv[1])
        ],
        "timeline": [
            {"t_s": round(max(0.0, t - t0), 1), "bound": b, "confidence": c, "note": n}
            for t, b, c, n in s["changes"]
        ],
        "ranks": rows,
        "straggler": straggler,
        "gpus": [_gpu(k, g) for k, g in sorted(s["gpus"].items(), key=_num)],
        "throttle": _throttle(s["throttle_s"], duration),
        "findings": _findings(s),
        "captures": [
            {"t_s": round(t - t0, 1), **{k: d.get(k) for k in CAPTURE_FIELDS}}
            for t, _w, kind, d in s["events"]
            if kind == "capture" and d.get("status") != "running"
        ],
        "exits": [
            {"t_s": round(t - t0, 1), "pid": d.get("pid"), "exit_code": d.get("exit_code")}
            for t, _w, kind, d in s["events"]
            if kind == "target-exit"
        ],
        "shifts": [
            {"t_s": round(t - t0, 1), **shift}
            for t, _w, kind, d in s["events"]
            if kind == "step-shift" and (shift := _shift(d)) is not None
        ][:SHIFTS_LISTED],
        "armed": [
            {"t_s": round(t - t0, 1), **armed}
            for t, _w, kind, d in s["events"]
            if kind == "armed" and (armed := _armed(d)) is not None
        ][:ARMED_LISTED],
        "series": [
            {"t_s": round(max(0.0, t - t0), 1), "step_s": step, "gpu_pct": act, "verdict": v}
            for t, step, act, v in chart_points(s["points"])
        ],
        "budget_series": _budget_series(s["budget_points"], t0),
        "gpu_series": _gpu_series(s["gpu_points"], t0, recording),
        "step_hist": [
            {
                "rank": r["rank"],
                "step_s": [round(bucket_value(int(b)), 6) for b in hist],
                "count": [n for n in hist.values()],
            }
            for r, (_, raw) in zip(rows, ranks, strict=True)
            if (hist := dict(sorted(raw["hist"].items(), key=lambda kv: int(kv[0]))))
        ],
    }


def _budget_series(points: dict[str, dict[str, Any]], t0: float) -> list[dict[str, Any]]:
    """The budget over time: per 10-s interval, the job's shares (its typical rank's) and each
    rank's, from the steps that ended in it (intervals with no step are absent). A file's
    numbers no measurement gives (infinite, negative) are left out, and an interval whose
    typical rank is left out with them."""
    out = []
    for key in sorted(points, key=int):
        p = points[key]
        ranks = {rank: {"seconds": r[0], "steps": r[1],
                        "shares": {k: v for k, v in r[2].items() if _measured(v, 1.0)}}
                 for rank, r in sorted(p["ranks"].items(), key=_num)
                 if _measured(r[0], LONGEST_S)}  # fmt: skip
        t = p["start"] - t0
        if p["typical"] in ranks and _measured(t, LONGEST_S):
            out.append({"t_s": round(t, 1), "job": ranks[p["typical"]]["shares"],
                        "typical": p["typical"], "ranks": ranks})  # fmt: skip
    return out


SHIFTS_LISTED = 200
"""Shifts of step time a report lists (a job that flaps all day has its first)."""


def _shift(d: Any) -> dict[str, Any] | None:
    """A recorded shift of step time (``followed_run.shift_event``) as the report lists it, or
    None where the file's values are no shift (a recording may be crafted)."""
    if not isinstance(d, dict):
        return None
    rank, pid, step = d.get("rank"), d.get("pid"), d.get("step")
    before, after, moved = (
        _real_or_none(d.get("before_s")),
        _real_or_none(d.get("after_s")),
        d.get("moved_s"),
    )
    if not (isinstance(rank, str) and len(rank) <= 40 and type(pid) is int and type(step) is int):
        return None
    if before is None or after is None or before < 0 or after < 0:
        return None
    if not isinstance(moved, dict) or len(moved) > len(SLICES):
        return None
    slices = {k: float(v) for k, v in moved.items() if k in SLICES and _real_number(v)}
    shift = Shift(pid, step, 0, before, after, Mean(before, 0.0, 0), slices)
    return shift_docs([(shift, rank, 0.0)])[0]


def _armed(d: Any) -> dict[str, str] | None:
    """A recorded armed capture's event (``ArmEvent.doc``) as the report lists it, or None for
    one that is not (a crafted file): every field a string, cut and cleaned."""
    if not isinstance(d, dict) or not all(isinstance(d.get(k), str) for k in ARMED_FIELDS):
        return None
    return {k: printable(d[k], FIELD_MAX) for k in ARMED_FIELDS}


def _real_or_none(v: Any) -> float | None:
    return float(v) if _real_number(v) else None


def _real_number(v: Any) -> bool:
    """A number from a file that arithmetic survives and a measurement could be."""
    return (
        isinstance(v, int | float)
        and not isinstance(v, bool)
        and math.isfinite(v)
        and abs(v) < LONGEST_S
    )


LONGEST_S = 1e9
"""Past any session's length (30 years): a time or duration beyond it is a file's fancy."""


def _measured(v: float, most: float) -> bool:
    return math.isfinite(v) and 0 <= v <= most


def _mean(total: float, n: float, digits: int | None = None) -> float | None:
    """A bin's mean, or None where the file's sums give none a measurement could be."""
    if not n > 0 or not math.isfinite(m := total / n) or abs(m) > PLOT_MAX:
        return None
    return round(m, digits) if digits is not None else round(m)


def _gpu_series(
    points: dict[str, dict[str, list[Any]]], t0: float, recording: Recording
) -> list[dict[str, Any]]:
    """Each GPU per 10 s: means of activity (SM active, else util), SM clock and power, the
    highest power limit, and the seconds each clock-event reason held."""
    max_clock = {d.index: d.max_sm_clock_mhz for d in recording.devices}
    per_gpu: dict[str, list[dict[str, Any]]] = {}
    for key in sorted(points, key=int):
        t = max(0.0, int(key) * POINT_S - t0)
        if not _measured(t, LONGEST_S):
            continue
        for gpu, p in points[key].items():
            _n, act, n_act, clock, n_clock, power, n_power, limit, held = p
            per_gpu.setdefault(gpu, []).append({
                "t_s": round(t, 1),
                "active_pct": _mean(act, n_act, 1),
                "sm_clock_mhz": _mean(clock, n_clock),
                "power_w": _mean(power, n_power, 1),
                "power_limit_w": _mean(limit, 1, 1) or None,
                "held": {k: round(v, 1) for k, v in held.items() if _measured(v, LONGEST_S)},
            })  # fmt: skip
    return [
        {"gpu": int(gpu), "max_sm_clock_mhz": max_clock.get(int(gpu)), "points": pts}
        for gpu, pts in sorted(per_gpu.items(), key=_num)
    ]


CAPTURE_FIELDS = ("kind", "pid", "status", "folder", "reason")


def _throttle(per_reason: dict[str, dict[str, float]], duration: float) -> list[dict[str, Any]]:
    """Per reason: the most affected GPU's time, its share of the session, the GPUs hit."""
    out = []
    for reason, per_gpu in per_reason.items():
        worst = max(per_gpu.values(), default=0.0)
        out.append({"reason": reason, "seconds": round(worst, 1),
                    "share": _share(worst, duration), "gpus": len(per_gpu)})  # fmt: skip
    return sorted(out, key=lambda r: -r["seconds"])


def _share(part: float, whole: float) -> float:
    return round(part / whole, 4) if whole else 0.0


def _num(kv: tuple[str, Any]) -> int:
    return int(kv[0]) if kv[0].lstrip("-").isdigit() else 0


def _iso(wall: float) -> str | None:
    try:
        return dt.datetime.fromtimestamp(wall, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):  # a header's clock no calendar has
        return None


def _rank(rank: str, r: dict[str, Any], names: list[str]) -> dict[str, Any]:
    seconds = r["seconds"] or 0.0
    phases = {k: round(v / seconds, 4) for k, v in r["phases"].items()} if seconds else {}
    fingerprint = r.get("fingerprint") or {}
    mfu = None
    step_ns = r["flops_s"] * 1e9  # a file's sums may overflow to inf
    if r["flops"] and step_ns and math.isfinite(r["flops"]) and math.isfinite(step_ns):
        # the one MFU implementation, over one step standing for all of them
        whole = StepRecord(0, 0, int(step_ns), {}, flops=r["flops"])
        mfu = jsonable(mfu_of([whole], names, fingerprint))
    med, p90 = quantile_of(r["hist"], 0.5), quantile_of(r["hist"], 0.9)
    work = quantile_of(r["work_hist"], 0.5) if r.get("work_hist") else None
    sync = r["phases"].get("grad_sync", 0.0)
    return {
        "rank": int(rank) if rank.lstrip("-").isdigit() else rank,
        "steps": r["steps"],
        "step_s_median": round(med, 6) if med is not None else None,
        "step_s_p90": round(p90, 6) if p90 is not None else None,
        "steps_per_s": round(r["steps"] / seconds, 3) if seconds else None,
        "samples_per_s": round(r["samples"] / seconds, 1) if seconds and r["samples"] else None,
        "tokens_per_s": round(r["tokens"] / seconds, 1) if seconds and r["tokens"] else None,
        "phases": dict(sorted(phases.items(), key=lambda kv: -kv[1])),
        "work_s_median": round(work, 6) if work is not None else None,
        "work_s_mean": round((seconds - sync) / r["steps"], 6) if r["steps"] else None,
        "sync_share": round(sync / seconds, 4) if seconds else None,
        "work_vs_median": None,
        "mfu": mfu,
    }


def _straggler(
    summaries: list[tuple[str, dict[str, Any]]], ranks: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The straggler definition (``model.ranks.compare_ranks``, as the verdict, the ranks pane
    and /metrics apply it) over the whole recording: each rank's ``work_vs_median`` and the
    straggler, if any.

    The summaries keep no step lists, so the medians it compares come from histograms of 2 %
    buckets (within 1 % of the exact ones): each rank's median work from ``work_hist``, the
    bar from the main rank's median step. A file written before summaries kept ``work_hist``
    has mean work only: then every rank is compared by its mean."""
    medians = all(r["work_s_median"] is not None for r in ranks if r["steps"])
    rows = []
    for (_, raw), r in zip(summaries, ranks, strict=True):
        work = r["work_s_median"] if medians else r["work_s_mean"]
        if r["steps"] and work is not None and r["step_s_median"] is not None:
            sync = raw["phases"].get("grad_sync", 0.0) / r["steps"]
            rows.append(RankRow(r["rank"], None, r["steps"], r["step_s_median"] * 1e3,
                                work * 1e3, sync * 1e3))  # fmt: skip
    main = next((row for row in rows if str(row.rank) == MAIN_RANK), rows[0] if rows else None)
    step_ms = main.step_ms if main is not None and main.steps >= MIN_STEPS else None
    compared = compare_ranks(rows, step_ms)
    scores = {row.rank: row.score for row in compared.rows}
    for r in ranks:
        score = scores.get(r["rank"])
        r["work_vs_median"] = round(score, 3) if score is not None and len(rows) > 1 else None
    s = compared.straggler
    if s is None:
        return ranks, None
    return ranks, {
        "rank": s.row.rank,
        "work_vs_median": round(s.row.score or 0.0, 3),
        "excess_of_step": round(s.excess_of_step, 4),
    }


def _gpu(index: str, g: dict[str, Any]) -> dict[str, Any]:
    n = g["n"] or 1
    return {
        "gpu": int(index),
        "readings": g["n"],
        "util_pct_mean": round(g["util"] / n, 1),
        "sm_active_pct_mean": round(g["sm"] / g["n_sm"], 1) if g["n_sm"] else None,
        "power_w_mean": round(g["power"] / n, 1),
        "temp_c_max": g["temp_max"],
    }


def _findings(s: dict[str, Any]) -> list[dict[str, Any]]:
    """Every bound that was the principal, strongest share first, with its latest evidence;
    then each bound only ever shown beside it (``beside``), as last shown, with its cause."""
    order = {b: -sec for b, sec in s["verdict_s"].items()}
    out = []
    for bound, f in sorted(s["findings"].items(), key=lambda kv: order.get(kv[0], 0.0)):
        out.append(_finding_entry(bound, f, round(s["verdict_s"].get(bound, 0.0), 1)))
    for bound, f in (s.get("beside") or {}).items():
        if bound not in s["findings"]:
            out.append({**_finding_entry(bound, f, 0.0), "beside": True})
    return out


def _finding_entry(bound: str, f: dict[str, Any], seconds: float) -> dict[str, Any]:
    return {
        "bound": bound,
        "confidence": f.get("confidence"),
        "summary": f.get("summary"),
        "cause": (f.get("cause") or {}).get("text"),
        "evidence": f.get("evidence", []),
        "levers": f.get("levers", []),
        "savings": _savings(f),
        "seconds": seconds,  # rounded by the caller; never -0.0 ("-0 s")
    }


def _savings(f: dict[str, Any]) -> list[str | None]:
    """What each lever would save, as text, in the levers' order (a recording is untrusted: an
    entry that is not a saving reads as none; older recordings have none)."""
    got = f.get("lever_savings")
    return [
        saving_of_json(got[i] if isinstance(got, list) and i < len(got) else None)
        for i in range(len(f.get("levers", [])))
    ]


# ---- text ----


def render_report(doc: dict[str, Any], charts: bool = True, width: int = 100) -> str:
    r = doc["recording"]
    lines = [f"gputop report: {r['path']}"]
    command = r["command"]
    if isinstance(command, list):
        command = shlex.join(str(c) for c in command)
    what = command or (f"pid {r['pid']}" if r["pid"] else "the GPUs")
    lines.append(
        f"  {r['mode'] or 'session'} of {what} on {r['hostname'] or '?'}, started "
        f"{r['started'] or '?'}, {duration_text(r['duration_s'])}"
    )
    if r["gpus"]:
        sim = f" (SIMULATED: {r['simulated']})" if r["simulated"] else ""
        lines.append(f"  GPUs: {len(r['gpus'])} x {r['gpus'][0]}{sim}")
    if r["damage"]:
        lines.append(f"  note: the file {r['damage']}")
    lines += ["", "Time per verdict"]
    for v in doc["verdicts"]:
        lines.append(f"  {v['bound']:<22} {duration_text(v['seconds']):>10}  {v['share']:6.1%}")
    if not doc["verdicts"]:
        lines.append("  no verdict was recorded")
    budget = doc.get("budget") or {}
    if budget:
        lines += ["", "Where the step's time went (the budget the verdicts were named from)"]
        for label, shares in budget.items():
            who = "job" if label == JOB else f"rank {label}"
            lines.append(f"  {who:<8} {stacked(shares, width - 11)}")
    if doc["timeline"]:
        lines += ["", "Verdict changes"]
        for e in doc["timeline"][:40]:
            label = e["bound"] or e["note"] or "no bound"
            lines.append(f"  {e['t_s']:>9.1f} s  {label} ({e['confidence']:.0%})")
        if len(doc["timeline"]) > 40:
            lines.append(f"  ... {len(doc['timeline']) - 40} more (--json has them all)")
    lines += _ranks_text(doc["ranks"], doc["straggler"])
    lines += _gpus_text(doc)
    lines += _findings_text(doc["findings"])
    if doc["captures"]:
        lines += ["", "Captures"]
        for c in doc["captures"]:
            why = f": {c['reason']}" if c.get("reason") else ""
            lines.append(f"  {c['t_s']:>9.1f} s  {c['kind']} of pid {c['pid']}: {c['status']}{why}")
            if c.get("folder"):
                lines.append(f"               {c['folder']}")
    if doc.get("armed"):
        lines += ["", "Armed captures"]
        lines += [f"  {a['t_s']:>9.1f} s  {event_text(a)}" for a in doc["armed"]]
    if doc.get("shifts"):
        lines += ["", "Shifts of step time"]
        lines += [f"  {x['t_s']:>9.1f} s  {shift_line(x)}" for x in grouped(doc["shifts"])]
    for e in doc["exits"]:
        code = e["exit_code"]
        status = f"status {code}" if code is not None else "status unknown (not started by gputop)"
        lines.append(f"\nthe target (pid {e['pid']}) exited at {e['t_s']:.1f} s, {status}")
    if charts and doc["series"]:
        lines += ["", *_charts(doc["series"], width)]
    return "\n".join(lines) + "\n"


def _ranks_text(ranks: list[dict[str, Any]], straggler: dict[str, Any] | None) -> list[str]:
    if not ranks:
        return ["", "Steps: no agent reported steps (gputop run, or import gputop.agent)"]
    multi = len(ranks) > 1
    head = "  rank   steps   median     p90   steps/s  MFU     "
    out = ["", "Steps per rank", head + ("work  sync  vs median  " if multi else "") + "top phases"]
    for r in ranks:
        med = f"{r['step_s_median'] * 1e3:.1f} ms" if r["step_s_median"] is not None else "-"
        p90 = f"{r['step_s_p90'] * 1e3:.1f} ms" if r["step_s_p90"] is not None else "-"
        mfu = r["mfu"]
        mfu_text = f"{mfu['value']:.1%}" if mfu and mfu.get("value") is not None else "-"
        top = ", ".join(f"{k} {v:.0%}" for k, v in list(r["phases"].items())[:4])
        rate = f"{r['steps_per_s']:.2f}" if r["steps_per_s"] else "-"
        cols = ""
        if multi:
            w = r["work_s_median"] if r["work_s_median"] is not None else r["work_s_mean"]
            work = f"{w * 1e3:.0f}ms" if w is not None else "-"
            sync = f"{r['sync_share']:.0%}" if r["sync_share"] is not None else "-"
            vs = f"{r['work_vs_median']:.2f}x" if r["work_vs_median"] is not None else "-"
            cols = f"{work:>6} {sync:>5} {vs:>10}  "
        out.append(f"  {r['rank']:>4} {r['steps']:>7} {med:>9} {p90:>9} {rate:>8}  "
                   f"{mfu_text:<7} {cols}{top}")  # fmt: skip
    if straggler is not None:
        out.append(f"Straggler: rank {straggler['rank']} works {straggler['work_vs_median']:.2f}x "
                   f"the median rank (+{straggler['excess_of_step']:.0%} of the median step); "
                   "the others wait for it")  # fmt: skip
    main = ranks[0]
    if main["phases"]:
        out += ["", f"Phase breakdown (rank {main['rank']})"]
        for k, v in main["phases"].items():
            out.append(f"  {k:<12} {v:6.1%}  {'#' * _bar(v, 40)}")
    m = main["mfu"]
    if m:
        if m.get("value") is None:
            out.append(f"MFU: not computed: {m.get('note')}")
        else:
            peak = m.get("peak_flops")
            against = f"{m.get('board')} {m['precision']}" + (
                f" {peak / 1e12:g} TFLOP/s" if peak else ""
            )
            note = f" ({m['note']})" if m.get("note") else ""
            out.append(f"MFU {m['value']:.1%} of {against}{note}")
    return out


def _bar(share: float, width: int) -> int:
    """Characters for a share: a file's sums may overflow (inf, nan) or go negative."""
    return round(min(max(share, 0.0), 1.0) * width) if math.isfinite(share) else 0


def _gpus_text(doc: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if doc["gpus"]:
        out += ["", "GPUs", "  gpu  util mean  SM active  power mean  temp max"]
        for g in doc["gpus"]:
            sm = f"{g['sm_active_pct_mean']:.0f}%" if g["sm_active_pct_mean"] is not None else "n/a"
            temp = f"{g['temp_c_max']} C" if g["temp_c_max"] is not None else "n/a"
            out.append(f"  {g['gpu']:>3}  {g['util_pct_mean']:>8.0f}%  {sm:>9}  "
                       f"{g['power_w_mean']:>8.0f} W  {temp:>8}")  # fmt: skip
    out += ["", "Clock-event reasons (the most affected GPU's time and share; GPUs hit)"]
    if not doc["throttle"]:
        out.append("  none recorded")
    for t in doc["throttle"]:
        out.append(f"  {t['reason']:<28} {duration_text(t['seconds']):>10}  {t['share']:6.1%}  "
                   f"{t['gpus']} GPU(s)")  # fmt: skip
    return out


def _findings_text(findings: list[dict[str, Any]]) -> list[str]:
    if not findings:
        return []
    out = [
        "",
        "Findings (each bound that led or was shown beside, with its latest evidence and levers)",
    ]
    for f in findings:
        led = "beside the principal" if f.get("beside") else f"led {duration_text(f['seconds'])}"
        out.append(f"  {f['bound']} ({f['confidence']:.0%}, {led}): {f['summary']}")
        out += said_lines(said_of_entry(f), "    ")
    return out


def _charts(series: list[dict[str, Any]], width: int) -> list[str]:
    import plotext

    span = series[-1]["t_s"]
    unit, scale_x = ("s", 1.0) if span < 600 else ("min", 60.0) if span < 10800 else ("h", 3600.0)
    xs = [p["t_s"] / scale_x for p in series]
    out = []
    for key, title, scale in (
        ("step_s", "step time (ms, mean per 10 s, rank 0)", 1e3),
        ("gpu_pct", "GPU activity (%, SM active or util, mean of the GPUs)", 1.0),
    ):
        given = [(x, p[key] * scale) for x, p in zip(xs, series, strict=True) if p[key] is not None]
        pts = [(x, y) for x, y in given if _plottable(x, y)]
        if len(pts) < 2:
            continue
        out.append(_plot(plotext, pts, title, width, unit))
        if len(pts) < len(given):
            out.append(f"  ({len(given) - len(pts)} points no measurement gives are left out)")
    bounds = sorted({p["verdict"] for p in series if p["verdict"]})
    if bounds:
        pts = [(x, bounds.index(p["verdict"])) for x, p in zip(xs, series, strict=True)
               if p["verdict"] and _plottable(x, 0.0)]  # fmt: skip
        if len(pts) >= 2:
            out.append(_plot(plotext, pts, "verdict over time", width, unit, labels=bounds))
    return out


PLOT_MAX = 1e12
"""Above any step time (ms) or activity (%) a board gives; plotext 6.1 aborts the process
(std::bad_alloc) on some negative values, so only what a measurement can be is drawn."""


def _plottable(x: float, y: float) -> bool:
    return math.isfinite(x) and x >= 0.0 and math.isfinite(y) and 0.0 <= y <= PLOT_MAX


def _plot(plotext: Any, pts: list[tuple[float, float]], title: str, width: int, unit: str,
          labels: list[str] | None = None) -> str:  # fmt: skip
    fig = plotext.figure
    fig.clear()
    fig.plot_size(width, 12 if labels is None else max(8, 3 * len(labels) + 4))
    fig.theme("colorless")
    fig.title(title)
    xs, ys = zip(*pts, strict=True)
    signal = fig.signal(list(xs), list(ys))
    signal.lines()
    fig.draw(signal)
    fig.label(f"time ({unit})", "x")
    if labels is not None:
        fig.ruler("y").ticks(list(range(len(labels))), labels)
        fig.ruler("y").lim(-0.5, len(labels) - 0.5)
    else:
        fig.ruler("y").lim(0, max(ys) * 1.1 or 1)
    return fig.build().string(colorless=True)
