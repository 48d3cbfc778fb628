"""`gputop compare A B`: two recordings of a job side by side, B against A, by the code that
compares a live run with the job's last (``diagnose.run_compare``): the step's change with
its interval, the slices that moved, what changed, the verdicts of both. The document is
versioned (docs/compare.md, ``gputop schema compare``)."""

from __future__ import annotations

from typing import Any

from gputop import __version__
from gputop.diagnose import Remembered, compare
from gputop.errors import CannotDo
from gputop.record.recorded_run import RecordedRun
from gputop.render.compare import comparison_doc, comparison_lines, grouped, shift_docs, shift_line

SCHEMA_VERSION = 1


def _side(path: str, r: RecordedRun) -> dict[str, Any]:
    run = r.run
    assert run is not None
    return {
        "path": path,
        "script": run.key.script,
        "world_size": run.key.world_size,
        "started": round(run.started, 3),
        "steps": run.run.steps,
        "step_s": run.run.step.value,
        "error_s": run.run.step.error,
        "shares": {k: v[0] for k, v in run.run.shares.items() if v[0] > 0},
        "principal": run.principal,
        "lever": run.lever.text if run.lever is not None else None,
        "shifts": shift_docs(r.shifts),
        "damage": r.damage,
    }


def build_comparison(path_a: str, a: RecordedRun, path_b: str, b: RecordedRun) -> dict[str, Any]:
    """B against A; a recording with no run to compare is one line (``CannotDo``)."""
    for path, r in ((path_a, a), (path_b, b)):
        if r.run is None:
            raise CannotDo(
                f"{path} holds no run to compare: no agent reported 64 steps or more in it "
                "(record with the agent: gputop record --attach, or gputop run --record)"
            )
    assert a.run is not None and b.run is not None
    last: Remembered = a.run
    c = compare(last, b.run.run, b.run.key, b.run.settings)
    same_job = (a.run.key.script, a.run.key.world_size) == (b.run.key.script, b.run.key.world_size)
    return {
        "schema": "gputop.compare",
        "schema_version": SCHEMA_VERSION,
        "gputop_version": __version__,
        "same_job": same_job,
        "a": _side(path_a, a),
        "b": _side(path_b, b),
        "comparison": comparison_doc(c),
    }


def render_comparison(doc: dict[str, Any]) -> str:
    a, b = doc["a"], doc["b"]
    lines = ["gputop compare: B against A", f"  A  {a['path']}", f"  B  {b['path']}"]
    if not doc["same_job"]:
        lines.append(
            f"note: not the same job (A runs {a['script']} on {a['world_size']}, B "
            f"{b['script']} on {b['world_size']}): compared all the same"
        )
    lines.append("")
    lines += [x.replace("vs last run", "B vs A", 1) for x in comparison_lines(doc["comparison"])]
    for name, side in (("A", a), ("B", b)):
        lever = f"; try: {side['lever']}" if side["lever"] else ""
        lines.append(f"{name}: {side['principal'] or 'no bound'}{lever}")
        lines += [f"  {shift_line(x)}" for x in grouped(side["shifts"])]
        if side["damage"]:
            lines.append(f"  note: the file {side['damage']}")
    return "\n".join(lines) + "\n"
