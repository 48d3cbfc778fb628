"""A diagnosis as versioned JSON (docs/diagnose.md, ``gputop schema diagnose``): what a script
reads, and what the text form is made from."""

from __future__ import annotations

from typing import Any

from gputop import __version__
from gputop.diagnose import Finding
from gputop.headless.loop import Diagnosis
from gputop.model.setup import setup_of
from gputop.render.budget import budget_document
from gputop.render.compare import comparison_doc, shift_docs
from gputop.snapshot import jsonable

SCHEMA_VERSION = 1


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
        "run": None
        if d.run is None or not d.run.steps
        else {"steps": d.run.steps, "step_s": d.run.step.value, "error_s": d.run.step.error},
        "baseline": comparison_doc(d.comparison) if d.comparison is not None else None,
        "shifts": shift_docs(d.shifts, d.shift_change),
        "armed": [{"t_s": round(max(0.0, e.t - d.started), 2), **e.doc()} for e in d.armed],
        "exit_on": d.exit_on,
    }
