"""A corpus job, diagnosed and recorded by `gputop diagnose --record`: its last verdict is said
alike by every output that shows a verdict. `diagnose`'s text (from its JSON), the replay
screen's verdict pane and reasoning screen (the recording's verdict, as `gputop replay` shows
it), and `gputop report` as text and as a page name the same principal, with the same cause,
the same evidence and the same levers with the same savings.

tests/unit/render/test_verdict_said.py holds the same of a verdict built by hand; this one of
what a real job's readings made (gc_pressure: a cause and levers sized from the job's own
collections)."""

from __future__ import annotations

import html
import json
import re
import subprocess
from dataclasses import dataclass

import pytest
from harness import Harness
from rich.style import Style
from scenarios import CORPUS, by_name
from tests_support import note_timeline

from gputop.headless.text import render
from gputop.record.reader import open_recording
from gputop.record.replay import Player
from gputop.record.report import build_report, render_report
from gputop.render.report_page import build_page
from gputop.render.verdict import saving_of_json
from gputop.ui.panes.verdict import reasoning_text, verdict_lines

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.alone]

SCENARIO = "gc_pressure"
WATCH_S = 12.0
"""gc_pressure's final verdict held from 4 s in the separate-install runs (12 s of margin at 16 s:
tests/bench/margins.py over two runs, quiet): 8 s of margin here; this test's own timeline goes
to GPUTOP_MARGINS too."""

corpus = Harness()


@dataclass(frozen=True)
class Said:
    """The final principal as diagnose's JSON holds it, and each output's text."""

    principal: dict
    texts: dict[str, str]


def flat(text: str) -> str:
    """Every output's lines with their spacing made one: a line's words are what is said."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def page_text(page: str) -> str:
    """What a reader of the page reads: its tags dropped, its escapes undone (after)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.fixture(scope="module")
def said(tmp_path_factory) -> Said:
    path = tmp_path_factory.mktemp("agree-live") / "job.gputop"
    scenario = by_name(SCENARIO)
    out = subprocess.run(
        [*corpus.diagnose("--record", str(path), "--duration", str(WATCH_S)), "--",
         *corpus.command(scenario, WATCH_S + 30)],
        capture_output=True, text=True, timeout=WATCH_S + 120, cwd=CORPUS,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    note_timeline(doc["timeline"], WATCH_S)
    principal = doc["verdict"]["principal"]
    assert principal is not None and principal["bound"] in scenario.expected, doc["timeline"]

    recording = open_recording(path)
    assert recording.damage is None, recording.damage
    player, verdict = Player(recording), None
    for rec in recording.records():
        verdict = player.apply(rec) or verdict
    assert verdict is not None and verdict.principal is not None
    report = build_report(recording)
    shown = (verdict.since or 0.0) + 5.0
    texts = {
        "diagnose": render(doc, timeline=False),
        "pane": "\n".join(t.plain for t in verdict_lines(verdict, shown, _plain, 400)),
        "reasoning": reasoning_text(verdict),
        "report": render_report(report, charts=False),
        "page": page_text(build_page(report, None)),
    }
    return Said(principal, {name: flat(text) for name, text in texts.items()})


def _plain(level: str) -> Style:
    return Style()


def test_the_recording_ends_on_the_verdict_diagnose_printed(said):
    p = said.principal
    for name, text in said.texts.items():
        assert p["bound"] in text.lower(), (name, text)  # the pane's head says it in capitals
        assert " ".join(p["summary"].split()) in text, (name, text)


def test_every_output_says_the_same_cause_evidence_and_levers_with_savings(said):
    p = said.principal
    assert p["cause"] and p["levers"], p  # gc_pressure's cause is built from its collections
    savings = p.get("lever_savings") or []
    sized = [
        (lever, saving_of_json(savings[i] if i < len(savings) else None))
        for i, lever in enumerate(p["levers"])
    ]
    assert any(s for _, s in sized), sized  # at least one lever sized from the job's numbers
    for name, text in said.texts.items():
        assert f"why: {' '.join(p['cause']['text'].split())}" in text, (name, text)
        first, saving = sized[0]
        want = f"{first} ({saving})" if saving else first
        assert " ".join(want.split()) in text, (name, want, text)
        if name == "pane":  # the pane: the cause and the first lever, fitted to its width
            continue
        for e in p["evidence"]:
            mark = "+" if e["supports"] else "-"
            assert " ".join(f"{mark} {e['text']} [{e['source']}]".split()) in text, (name, text)
        at = [text.index(" ".join(lever.split())) for lever, _ in sized]
        assert at == sorted(at), (name, at)  # every lever, in the verdict's order
        for lever, saving in sized:
            if saving:
                assert " ".join(f"{lever} ({saving})".split()) in text, (name, lever, text)
