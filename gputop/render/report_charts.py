"""The HTML report's charts (``report_page``): each one an inline SVG drawn by matplotlib from the
report's JSON document (``record/report.build_report``), its text drawn as paths, so the page
needs no font, no script and nothing fetched (ARCHITECTURE.md says why matplotlib).

Every series is a group with an id the browser test finds (``budget-compute``, ``gpu-0-power``,
``verdict-side-work``). A chart draws at most ``MAX_POINTS`` bins: more are averaged in runs
(thinned), so a day's page stays a few MB. Imported only by ``gputop report --html``: the text
report never pays for matplotlib.
"""

from __future__ import annotations

import atexit
import io
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from gputop.diagnose import BY_NAME
from gputop.vocab import budget as slices
from gputop.vocab.reasons import THROTTLING

MAX_POINTS = 720
"""Bins one chart draws (two hours at 10 s); past it, runs of bins are averaged into one."""

SLICE_COLOURS: dict[str, str] = {
    slices.COMPUTE: "#4c9a2a",
    slices.DATA: "#e8a33d",
    slices.H2D: "#c4663a",
    slices.COMMS: "#3b6fb6",
    slices.STRAGGLER: "#7a4fa8",
    slices.EVAL: "#2aa7a0",
    slices.CHECKPOINT: "#d1495b",
    slices.LOG: "#8c8c3e",
    slices.GC: "#b86bb0",
    slices.LOOP: "#8a8a8a",
    slices.STALL: "#333333",
}
"""One colour per budget slice, the same in every chart (the browser test looks for them)."""
FEW = 60
"""Points a line shows each of (a marker apiece); more are the line alone, to keep it small."""
THROTTLED = "#f4b6b6"
"""The shading of the bins a clock-event reason that slows a busy GPU held."""
WIDTH_IN = 10.0
LIST_ROWS = 64
"""Rows one chart draws (bounds, ranks): a crafted recording's thousands of names are not."""


def ident(text: str) -> str:
    """A name as a piece of an element id: lower-case letters, digits and dashes."""
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")[:60] or "x"


def _pyplot() -> Any:
    """matplotlib's pyplot on the SVG backend (no display), its cache in a private folder
    when the home's cannot be written (a service account, a read-only home)."""
    if "MPLCONFIGDIR" not in os.environ:
        home = os.path.join(os.path.expanduser("~"), ".config")
        if not os.access(home if os.path.isdir(home) else os.path.dirname(home), os.W_OK):
            private = tempfile.mkdtemp(prefix="gputop-mpl-")  # 0700
            os.environ["MPLCONFIGDIR"] = private
            atexit.register(shutil.rmtree, private, ignore_errors=True)
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "path", "font.size": 9, "axes.spines.top": False,
                         "axes.spines.right": False, "figure.dpi": 72})  # fmt: skip
    return plt


def _svg(plt: Any, fig: Any, name: str) -> str:
    """The figure as one SVG element (no XML prolog, no doctype), its ids salted by ``name`` so
    two charts' clip paths never share an id."""
    plt.rcParams["svg.hashsalt"] = name
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def thin(n: int, limit: int = MAX_POINTS) -> int:
    """How many bins each drawn point stands for."""
    return max(1, math.ceil(n / limit))


def _runs(items: Sequence[Any], k: int) -> list[Sequence[Any]]:
    return [items[i : i + k] for i in range(0, len(items), k)]


def _mean(xs: Sequence[float | None]) -> float | None:
    got = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(got) / len(got) if got else None


def _time_axis(ax: Any, span: float) -> Callable[[float], float]:
    unit, scale = ("s", 1.0) if span < 600 else ("min", 60.0) if span < 10800 else ("h", 3600.0)
    ax.set_xlabel(f"time ({unit})")
    return lambda t: t / scale


# ---- the verdict timeline ----


def verdict_spans(changes: Sequence[dict[str, Any]], end: float,
                  limit: int = MAX_POINTS) -> list[tuple[str, float, float]]:  # fmt: skip
    """(bound, start, end) while each led; past ``limit`` spans, the session in ``limit``
    equal bins, each given to the bound that led longest in it (runs of one bound merged)."""
    spans = []
    for c, nxt in zip(changes, [*changes[1:], None], strict=True):
        t1 = nxt["t_s"] if nxt is not None else max(end, c["t_s"])
        spans.append((c["bound"] or "none", c["t_s"], t1))
    if len(spans) <= limit or end <= 0:
        return spans
    width = end / limit
    held: list[dict[str, float]] = [{} for _ in range(limit)]
    for bound, a, b in spans:
        i = min(int(a / width), limit - 1)
        while i < limit and i * width < b:
            overlap = min(b, (i + 1) * width) - max(a, i * width)
            held[i][bound] = held[i].get(bound, 0.0) + max(overlap, 0.0)
            i += 1
    out: list[tuple[str, float, float]] = []
    for i, h in enumerate(held):
        if not h:
            continue
        bound = max(h, key=h.__getitem__)
        if out and out[-1][0] == bound and out[-1][2] == i * width:
            out[-1] = (bound, out[-1][1], (i + 1) * width)
        else:
            out.append((bound, i * width, (i + 1) * width))
    return out


def verdict_chart(plt: Any, doc: dict[str, Any]) -> str | None:
    """Which bound led when: one row per bound, a bar while it was the principal."""
    end = doc["recording"]["duration_s"]
    spans = verdict_spans(doc["timeline"], end)
    if not spans:
        return None
    bounds = sorted({b for b, _, _ in spans})[:LIST_ROWS]
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.4 * len(bounds) + 1.0))
    x = _time_axis(ax, end)
    for i, b in enumerate(bounds):
        entry = BY_NAME.get(b)
        colour = SLICE_COLOURS.get(entry.slices[0], "#8a8a8a") if entry and entry.slices else "#999"
        bars = ax.broken_barh([(x(a), max(x(e) - x(a), 1e-9)) for n, a, e in spans if n == b],
                              (i - 0.35, 0.7), facecolors=colour)  # fmt: skip
        bars.set_gid(f"verdict-{ident(b)}")
    ax.set_yticks(range(len(bounds)), bounds)
    ax.set_title("verdict over time (the principal bound)", loc="left")
    return _svg(plt, fig, "verdict")


# ---- the budget over time ----


def principal_slice(doc: dict[str, Any]) -> str | None:
    """The slice of the bound that led longest (of its slices, the one the job lost most to),
    else the job's largest loss."""
    job = rank_budgets(doc).get("job") or {}
    named: tuple[str, ...] = slices.LOSSES
    for v in doc["verdicts"]:
        entry = BY_NAME.get(v["bound"])
        if entry is not None and entry.slices:
            named = entry.slices
            break
    losses = {k: v for k, v in job.items() if k in named and k in slices.LOSSES}
    return max(losses, key=losses.__getitem__) if losses else None


def budget_chart(plt: Any, doc: dict[str, Any]) -> str | None:
    """The job's budget per 10 s, stacked by slice; the principal's slice edged and named."""
    series = doc["budget_series"]
    if not series:
        return None
    k = thin(len(series))
    ts, shares = [], []
    for run in _runs(series, k):
        weights = [max(p["ranks"][p["typical"]]["seconds"], 1e-9) for p in run]
        total = sum(weights)
        ts.append(run[0]["t_s"])
        shares.append({s: sum(p["job"].get(s, 0.0) * w for p, w in zip(run, weights, strict=True))
                       / total for s in slices.SLICES})  # fmt: skip
    step = 10.0 * k
    present = [s for s in slices.SLICES if any(sh[s] > 0 for sh in shares)]
    principal = principal_slice(doc)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.2))
    x = _time_axis(ax, ts[-1] + step)
    xs = [x(t) for t in ts] + [x(ts[-1] + step)]
    ys = [[100 * sh[s] for sh in shares] + [100 * shares[-1][s]] for s in present]
    names = [s + (" (principal)" if s == principal else "") for s in present]
    colours = [SLICE_COLOURS[s] for s in present]
    polys = ax.stackplot(xs, ys, colors=colours, step="post", labels=names)
    for s, poly in zip(present, polys, strict=True):
        poly.set_gid(f"budget-{s}")
        if s == principal:
            poly.set_edgecolor("black")
            poly.set_linewidth(1.5)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of the step's time")
    ax.set_xlim(xs[0], xs[-1])
    every = f"{step:g} s" + (f" (bins of {k} intervals averaged)" if k > 1 else "")
    ax.set_title(f"where the step's time went, per {every}", loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return _svg(plt, fig, "budget")


def rank_budgets(doc: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Each rank's budget over the session (and the job's): the verdicts' (``budget``) where
    the recording has it, else the budget over time's intervals weighted by their seconds."""
    if doc.get("budget"):
        return dict(doc["budget"])
    sums: dict[str, dict[str, float]] = {}
    for p in doc["budget_series"]:
        for label, r in (("job", p["ranks"][p["typical"]]), *p["ranks"].items()):
            into = sums.setdefault(label, {})
            for s, share in r["shares"].items():
                into[s] = into.get(s, 0.0) + share * r["seconds"]
    out = {}
    for label, by in sums.items():
        total = sum(by.values())
        if total > 0:
            out[label] = {s: v / total for s, v in by.items()}
    return out


def ranks_chart(plt: Any, doc: dict[str, Any]) -> str | None:
    """Each rank's budget over the session as one stacked bar (the job's on top)."""
    budget = rank_budgets(doc)
    labels = sorted(budget, key=lambda r: (r != "job", int(r) if r.lstrip("-").isdigit() else 0))
    if not labels:
        return None
    labels = labels[:LIST_ROWS]
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.35 * len(labels) + 1.2))
    left = [0.0] * len(labels)
    rows = range(len(labels))
    for s in slices.SLICES:
        widths = [100 * budget[r].get(s, 0.0) for r in labels]
        if not any(widths):
            continue
        bars = ax.barh(rows, widths, left=left, color=SLICE_COLOURS[s], label=s, height=0.7)
        for r, patch, w in zip(labels, bars.patches, widths, strict=True):
            patch.set_gid(f"ranks-{s}-{ident(r)}")
            patch.set_visible(w > 0)  # no empty bar named as if it had the slice
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(rows, [r if r == "job" else f"rank {r}" for r in labels])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of the step's time over the session")
    ax.set_title("budget per rank", loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return _svg(plt, fig, "ranks")


# ---- step times ----


def steps_chart(plt: Any, doc: dict[str, Any]) -> str | None:
    """The step-time distribution, one outline per rank (filled when there is one)."""
    hists = [h for h in doc["step_hist"] if h["count"]][:16]  # more ranks: a legend no one reads
    if not hists:
        return None
    lo = min(min(h["step_s"]) for h in hists)
    hi = max(max(h["step_s"]) for h in hists)
    edges = _log_edges(lo, hi, 60)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.0))
    for h in hists:
        ms = [1e3 * s for s in h["step_s"]]
        _, _, patches = ax.hist(ms, bins=[1e3 * e for e in edges], weights=h["count"],
                                histtype="stepfilled" if len(hists) == 1 else "step",
                                alpha=0.8 if len(hists) == 1 else 1.0, label=f"rank {h['rank']}",
                                linewidth=1.2)  # fmt: skip
        for patch in patches:
            patch.set_gid(f"steps-rank-{ident(h['rank'])}")
    ax.set_xscale("log")
    ax.set_xlabel("step time (ms)")
    ax.set_ylabel("steps")
    ax.set_title("step-time distribution", loc="left")
    if len(hists) > 1:
        ax.legend(frameon=False)
    return _svg(plt, fig, "steps")


def _log_edges(lo: float, hi: float, n: int) -> list[float]:
    lo, hi = lo / 1.02, hi * 1.02
    return [lo * (hi / lo) ** (i / n) for i in range(n + 1)]


# ---- the GPUs ----


def gpu_chart(plt: Any, gpu: dict[str, Any], doc_end: float) -> str | None:
    """One GPU: activity, SM clock against its maximum, power against its limit, the bins a
    throttling clock-event reason held shaded on all three."""
    pts = gpu["points"]
    if not pts:
        return None
    i = ident(gpu["gpu"])
    k = thin(len(pts))
    runs = _runs(pts, k)
    step = 10.0 * k
    fig, axes = plt.subplots(3, 1, figsize=(WIDTH_IN, 5.2), sharex=True)
    end = max(doc_end, runs[-1][0]["t_s"])
    x = _time_axis(axes[-1], end)
    xs = [x(min(r[0]["t_s"] + step / 2, end)) for r in runs]  # each point mid-bin
    axes[-1].set_xlim(0, x(end))
    held = held_runs(pts, k)
    limit = [_mean([p["power_limit_w"] for p in run]) for run in runs]
    lines = (
        ("activity", "SM active / util %", [_mean([p["active_pct"] for p in r]) for r in runs],
         None, None),
        ("clock", "SM clock (MHz)", [_mean([p["sm_clock_mhz"] for p in r]) for r in runs],
         [gpu["max_sm_clock_mhz"]] * len(runs) if gpu["max_sm_clock_mhz"] else None, "max"),
        ("power", "power (W)", [_mean([p["power_w"] for p in r]) for r in runs],
         limit if any(v is not None for v in limit) else None, "limit"),
    )  # fmt: skip
    for ax, (name, label, ys, ref, ref_name) in zip(axes, lines, strict=True):
        if any(held):
            edges = [x(r[0]["t_s"]) for r in runs] + [x(runs[-1][0]["t_s"] + step)]
            shade = ax.fill_between(edges, 0, 1,
                                    where=[*held, held[-1]], step="post", color=THROTTLED,
                                    transform=ax.get_xaxis_transform(), linewidth=0)  # fmt: skip
            shade.set_gid(f"gpu-{i}-{name}-throttled")
        dots = "." if len(xs) <= FEW else None  # a few points: each shown; many: the line alone
        (line,) = ax.plot(xs, _nan(ys), color="#1f4e79", linewidth=1.2, label=name, marker=dots)
        line.set_gid(f"gpu-{i}-{name}")
        if ref is not None:
            (r,) = ax.plot(xs, _nan(ref), color="#a33", linestyle="--", linewidth=1, label=ref_name)
            r.set_gid(f"gpu-{i}-{name}-{ref_name}")
            ax.legend(loc="lower right", frameon=False)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
    title = f"GPU {gpu['gpu']}" + (" (shaded: a throttling clock-event reason held)"
                                   if any(held) else "")  # fmt: skip
    axes[0].set_title(title, loc="left")
    return _svg(plt, fig, f"gpu-{i}")


def held_runs(points: Sequence[dict[str, Any]], k: int) -> list[bool]:
    """Per drawn point (a run of ``k`` bins): whether a throttling reason held in any of them."""
    return [any(r in THROTTLING for p in run for r in p["held"]) for run in _runs(points, k)]


def _nan(ys: Sequence[float | None]) -> list[float]:
    return [math.nan if y is None else y for y in ys]


def charts(doc: dict[str, Any], gpus_max: int = 16) -> list[tuple[str, str]]:
    """(id, SVG) of every chart the document has data for, in the page's order."""
    plt = _pyplot()
    out = []
    for name, draw in (("verdict", verdict_chart), ("budget", budget_chart),
                       ("ranks", ranks_chart), ("steps", steps_chart)):  # fmt: skip
        svg = draw(plt, doc)
        if svg is not None:
            out.append((name, svg))
    for gpu in doc["gpu_series"][:gpus_max]:
        svg = gpu_chart(plt, gpu, doc["recording"]["duration_s"])
        if svg is not None:
            out.append((f"gpu-{ident(gpu['gpu'])}", svg))
    return out
