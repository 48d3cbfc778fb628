"""One verdict, said the same everywhere: the screen's pane, its reasoning screen, `gputop
diagnose`'s text, and a recording's report as text and as a page name the same cause, the
same evidence and the same levers with the same savings, for the principal and for a finding
shown beside it (render/verdict.py builds the words once)."""

from __future__ import annotations

import html
import re
from pathlib import Path

from builders import device
from rich.style import Style

from gputop.diagnose import Cause, EvalPoint, Evidence, Finding, Saving, Verdict
from gputop.headless import Diagnosis, document, render
from gputop.record.reader import open_recording
from gputop.record.report import build_report, render_report
from gputop.record.writer import Recorder
from gputop.render.report_page import build_page
from gputop.ui.panes.verdict import reasoning_text, verdict_lines

T0 = 1000.0
CAUSE = "rank 1's inputs are 2.0x the others' (1.0 M elements a step against 0.5 M)"
EVIDENCE = "rank 0 waits 40 ms a step for rank 1"
LEVERS = ("balance the work per rank (a sampler that groups by length)", "look at rank 1's GPU")
SAVING = Saving(0.28, 1.39, "if rank 1's extra 40 ms a step went", 0.2, 0.3)
BESIDE_CAUSE = "DDP all-reduces 90 MB a step & 12 ms of it is exposed <after backward>"


def the_verdict() -> Verdict:
    principal = Finding(
        "straggler", True, 0.8, "straggler wait 28% of the step",
        (Evidence(EVIDENCE, "agent"), Evidence("the GPUs are alike", "NVML", supports=False)),
        LEVERS, cause=Cause(CAUSE), lever_savings=(SAVING, None),
    )  # fmt: skip
    beside = Finding("comms", True, 0.6, "comms 20% of the step", (), ("bigger buckets",),
                     cause=Cause(BESIDE_CAUSE))  # fmt: skip
    return Verdict(principal, (beside,), (principal, beside), T0, "", ("agent", "NVML"))


def flat(text: str) -> str:
    """Every output's lines with their spacing made one: a line's words are what is said."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def page_text(page: str) -> str:
    """What a reader of the page reads: its tags dropped, its escapes undone (after)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def outputs(tmp_path: Path) -> dict[str, str]:
    v = the_verdict()
    rec = Recorder(tmp_path / "f", clock=lambda: T0)
    rec.start((device(0),), {"mode": "record"})
    for k in range(3):
        rec.verdict(EvalPoint(T0 + k), v)
    rec.close()
    report = build_report(open_recording(tmp_path / "f"))
    diagnosis = Diagnosis(started=T0, verdict=v)
    pane = verdict_lines(v, T0 + 5, lambda level: Style(), 400)
    return {
        "pane": "\n".join(t.plain for t in pane),
        "reasoning": reasoning_text(v),
        "diagnose": render(document(diagnosis, {}), timeline=False),
        "report": render_report(report, charts=False),
        "page": page_text(build_page(report, None)),
    }


def test_every_output_says_the_principals_cause_evidence_and_levers_alike(tmp_path):
    said = {name: flat(text) for name, text in outputs(tmp_path).items()}
    for name, text in said.items():
        assert f"why: {CAUSE}" in text, (name, text)
        assert f"{LEVERS[0]} ({SAVING.text})" in text, (name, text)
        if name != "pane":  # the pane shows the first lever alone at any width under 120
            assert f"+ {EVIDENCE} [agent]" in text, (name, text)
    for name in ("reasoning", "diagnose", "report", "page"):  # every lever, in order
        assert said[name].index(LEVERS[0]) < said[name].index(LEVERS[1]), name


def test_a_finding_beside_the_principal_keeps_its_cause_in_every_text(tmp_path):
    said = {name: flat(text) for name, text in outputs(tmp_path).items()}
    for name in ("reasoning", "diagnose", "report", "page"):
        assert f"why: {BESIDE_CAUSE}" in said[name], (name, said[name])
    assert "comms (60%)" in said["pane"]  # the pane names it; the reasoning screen says why
