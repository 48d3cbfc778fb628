"""The step-time budget as people and programs read it: one stacked line (the verdict pane,
``run --no-tui``, the report), the full table (the why screen, ``diagnose``) and the JSON
document (``diagnose --json``, docs/diagnose.md). The budget itself is data
(``model/budget.py``); every output writes it through these, so the shares read the same
everywhere."""

from __future__ import annotations

from collections.abc import Mapping

from gputop.diagnose import FLOOR
from gputop.model.budget import Budget, RankBudget, Slice
from gputop.vocab import budget as b


def stacked(shares: Mapping[str, float], width: int = 80) -> str:
    """Shares as one line, compute first, then the losses largest first, in whole percent
    ("compute 52 | eval 33 | data 10 | loop 5"); slices under half a percent are left out, and
    the smallest go first when the line would pass ``width``."""
    rest = sorted((n for n in b.LOSSES if shares.get(n, 0) >= 0.005), key=lambda n: -shares[n])
    parts = [f"{n} {round(100 * shares.get(n, 0))}" for n in (b.COMPUTE, *rest)]
    while len(parts) > 1 and len(" | ".join(parts)) > width:
        parts.pop()
    return " | ".join(parts)


def budget_line(budget: Budget, width: int = 80) -> str:
    """The job's budget (its typical rank's) as one stacked line."""
    return stacked(budget.typical.shares, width)


def budget_table(budget: Budget) -> list[str]:
    """The budget in full: each slice with every source's own measure and which agree, then
    each rank's line."""
    r = budget.typical
    over = f"{r.steps} steps" if r.steps else f"{r.samples} stack samples"
    sources = sorted({src for x in budget.slices for src, _ in x.estimates})
    out = [
        f"Step-time budget of {r.label} ({over}, {r.seconds:.0f} s; from {r.source}):",
        f"  {'slice':<24}{'share':>7}{'±':>4}" + "".join(f"{s:>8}" for s in sources) + "  agree",
    ]
    for x in budget.slices:
        if x.share < 0.005 and all(v < 0.005 for _, v in x.estimates):
            continue
        own = dict(x.estimates)
        cells = "".join(f"{round(100 * own[s]):>7}%" if s in own else f"{'':>8}" for s in sources)
        out.append(
            f"  {b.NAMES[x.name]:<24}{round(100 * x.share):>6}%{_margin(x):>4}{cells}"
            f"  {', '.join(x.agree)}"
        )
    if len(budget.ranks) > 1:
        out.append("  per rank:")
        out += [f"    {q.label:<10} {stacked(q.shares, 200)}" for q in budget.ranks]
    return out


def _margin(x: Slice) -> str:
    """The share's margin in whole points ("3"); blank under half a point."""
    margin = round(100 * x.margin)
    return str(margin) if margin else ""


def _rank_document(q: RankBudget) -> dict[str, object]:
    return {
        "rank": q.rank,
        "pid": q.pid,
        "source": q.source,
        "seconds": round(q.seconds, 3),
        "steps": q.steps,
        "samples": q.samples,
        "shares": {n: round(q.shares[n], 4) for n in b.SLICES},
    }


def budget_document(budget: Budget) -> dict[str, object]:
    """The budget as JSON: the job's slices with each source's measure and agreement, and every
    rank's shares."""
    return {
        "version": 1,
        "floor": FLOOR,
        "of": _rank_document(budget.typical),
        "slices": [
            {
                "name": x.name,
                "share": round(x.share, 4),
                "low": round(x.low, 4),
                "interval": [round(v, 4) for v in x.interval],
                "estimates": {src: round(v, 4) for src, v in x.estimates},
                "agree": list(x.agree),
            }
            for x in budget.slices
        ],
        "ranks": [_rank_document(q) for q in budget.ranks],
    }
