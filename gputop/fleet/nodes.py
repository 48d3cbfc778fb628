"""Pure: one row per node of a training job from the fleet's query results, the slow node
first. A node is judged by its typical rank's work per step against the whole job's typical
rank (the measure of deploy/prometheus/gputop-fleet.yml's GputopSlowNode)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop.fleet.client import Sample
from gputop.model.ranks import typical
from gputop.vocab import budget as slices

SLOW_NODE = 1.2
"""A node whose typical rank works this much longer per step than the job's is the slow node
(the alert rule's threshold: a test holds them equal)."""


@dataclass(frozen=True)
class NodeRow:
    """What `gputop fleet` says about one node."""

    instance: str
    job: str | None
    verdict: str | None
    """The node's principal bound (gputop's verdict there), None before it has one."""
    biggest_loss: tuple[str, float] | None
    """The budget's largest loss slice and its share of wall time."""
    work_s: float | None
    """The node's typical rank's work per step (s)."""
    ratio: float | None
    """... over the job's typical rank's: 1.0 typical, 1.3 = 30% more work per step."""
    slowest_rank: tuple[str, float] | None
    """The node's rank with the most work per step, and that work (s)."""
    stuck_ranks: tuple[str, ...]
    """Ranks in one phase for longer than the stuck limit."""
    throttled_gpus: tuple[str, ...]
    """GPUs held by a throttling clock-event reason now."""

    @property
    def slow(self) -> bool:
        return self.ratio is not None and self.ratio > SLOW_NODE


def node_rows(results: Mapping[str, Sequence[Sample]]) -> list[NodeRow]:
    """Every node that any query names, the slowest (by work ratio) first, then by name."""
    work = results.get("work", ())
    jobs = {s.labels.get("instance", "?"): s.labels.get("training_job") for s in work}
    by_job: dict[str | None, list[float]] = {}
    for s in work:
        by_job.setdefault(s.labels.get("training_job"), []).append(s.value)
    job_median = {job: typical(v, key=float) for job, v in by_job.items()}
    instances = sorted({s.labels.get("instance", "?") for q in results.values() for s in q})
    rows = [_row(i, jobs.get(i), job_median.get(jobs.get(i)), results) for i in instances]
    return sorted(rows, key=lambda r: (-(r.ratio or 0.0), r.instance))


def _row(
    instance: str,
    job: str | None,
    job_median: float | None,
    results: Mapping[str, Sequence[Sample]],
) -> NodeRow:
    def mine(name: str) -> list[Sample]:
        return [s for s in results.get(name, ()) if s.labels.get("instance", "?") == instance]

    ranks = {s.labels.get("rank", "?"): s.value for s in mine("work")}
    work = typical(ranks.values(), key=float) if ranks else None
    ratio = work / job_median if work is not None and job_median else None
    slowest = max(ranks.items(), key=lambda kv: kv[1]) if ranks else None
    verdict = next((s.labels.get("bound") for s in mine("verdict")), None)
    losses = [
        (s.labels["slice"], s.value)
        for s in mine("shares")
        if s.labels.get("slice") in slices.LOSSES
    ]
    biggest = max(losses, key=lambda kv: kv[1]) if losses else None
    stuck = tuple(sorted({s.labels.get("rank", "?") for s in mine("stuck")}))
    throttled = tuple(sorted({s.labels.get("gpu", "?") for s in mine("throttled")}))
    return NodeRow(instance, job, verdict, biggest, work, ratio, slowest, stuck, throttled)


SCHEMA_VERSION = 1
"""Of ``gputop fleet --json`` (gputop/schemas/fleet.schema.json, docs/fleet.md)."""


def fleet_document(
    rows: Sequence[NodeRow], prometheus: str, job: str | None, taken_at: str, version: str
) -> dict[str, object]:
    """What ``gputop fleet --json`` prints: the reading's provenance and its node rows."""
    return {
        "schema_version": SCHEMA_VERSION,
        "gputop_version": version,
        "taken_at": taken_at,
        "prometheus": prometheus,
        "training_job": job,
        "slow_bar": SLOW_NODE,
        "nodes": as_json(rows),
    }


def as_json(rows: Sequence[NodeRow]) -> list[dict[str, object]]:
    """The node rows of ``gputop fleet --json``."""
    return [
        {
            "instance": r.instance,
            "training_job": r.job,
            "verdict": r.verdict,
            "biggest_loss": _pair(r.biggest_loss, "slice", "share"),
            "work_s_per_step": r.work_s,
            "work_ratio": r.ratio,
            "slow": r.slow,
            "slowest_rank": _pair(r.slowest_rank, "rank", "work_s_per_step"),
            "stuck_ranks": list(r.stuck_ranks),
            "throttled_gpus": list(r.throttled_gpus),
        }
        for r in rows
    ]


def _pair(pair: tuple[str, float] | None, name: str, value: str) -> dict[str, object] | None:
    """A (name, value) pair as a JSON object with those keys, or None."""
    return {name: pair[0], value: pair[1]} if pair else None


def text_lines(rows: Sequence[NodeRow]) -> list[str]:
    """One line per node, the slow node first: what a terminal shows with --once."""
    if not rows:
        return ["no node reports gputop's metrics (is `gputop --prometheus` scraped?)"]
    out = []
    for r in rows:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "n/a"
        work = f"{1e3 * r.work_s:.0f} ms" if r.work_s is not None else "n/a"
        loss = f"{r.biggest_loss[0]} {r.biggest_loss[1]:.0%}" if r.biggest_loss else "-"
        line = (
            f"{'SLOW ' if r.slow else '     '}{r.instance:<24} work/step {work:>7} ({ratio} "
            f"the job's)  verdict {r.verdict or '-'}  biggest loss {loss}"
        )
        if r.slowest_rank:
            line += f"  slowest rank {r.slowest_rank[0]} {1e3 * r.slowest_rank[1]:.0f} ms"
        if r.stuck_ranks:
            line += f"  STUCK ranks {','.join(r.stuck_ranks)}"
        if r.throttled_gpus:
            line += f"  throttled GPUs {','.join(r.throttled_gpus)}"
        out.append(line)
    return out
