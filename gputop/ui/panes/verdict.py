"""The verdict pane and the full reasoning, as styled text. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text

from gputop.diagnose import BY_NAME, Finding, Style, Verdict
from gputop.render.budget import budget_line, budget_table
from gputop.render.verdict import said, said_lines
from gputop.session import SessionState
from gputop.ui.gpu_text import Line, StyleFor
from gputop.ui.line_fit import ellipsize, wrap
from gputop.ui.panes.pane import Context, Pane

LEVEL = {Style.GOOD: "good", Style.NEUTRAL: "dim", Style.BAD: "bad"}
"""The registry's style of a bound -> the theme's style name; a bound no entry declares (a
recording from another version) shows as a problem."""


def _held(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    if seconds < 60:
        return f"for {seconds}s"
    return f"for {seconds // 60}m{seconds % 60:02d}s"


def verdict_lines(
    v: Verdict | None, now: float, style: StyleFor, width: int, compact: bool = False
) -> list[Text]:
    """``compact`` (a short terminal): the verdict and the cheapest lever only, the lever on
    one line. Lines wrap or end in an ellipsis at ``width``: never cut mid-word."""
    head = Line(style).add(" verdict ", "name")
    if v is None:
        return [head.label("waiting for readings").text]
    p = v.principal
    if p is None:
        if v.warming_up:  # the job is starting: its own tag, then how far it is
            _, _, how = v.note.partition(":")
            return [head.add(" WARMING UP ", "dim").label(f" {how.strip()}").text]
        if v.stalled:  # stopped moving, not yet for the hang limit: who waits where
            how = v.note.removeprefix("no progress ")
            return [head.add(" STALLED ", "warn").label(f" {how}").text]
        return [head.label(v.note or "no bound stands out yet").text]
    entry = BY_NAME.get(p.bound)
    level = LEVEL[entry.style] if entry and entry.style else "bad"
    head.add(f" {p.bound.upper()} ", level)
    held = _held(now - v.since if v.since is not None else None)
    full = head.text.copy()
    full.append_text(Line(style).label(f" {p.summary}  (confidence {p.confidence:.0%}").text)
    full.append_text(Line(style).label(f", {held})" if held else ")").text)
    if full.cell_len <= width:
        lines = [full]
    else:  # narrow: the bound and how sure, then the summary wrapped under it
        head.label(f" {p.confidence:.0%}" + (f", {held}" if held else "") + f": {p.summary}")
        lines = wrap(head.text, width, indent=3)
    said_ = said(p)  # the words every output says, fitted here to the pane's width
    if said_.why:  # the second why, in one line at any width
        lines.append(ellipsize(Line(style).label("   why: ").add(said_.why).text, width))
    for risk in v.risks[:1]:  # what may end the job, whatever costs most now
        lines.append(ellipsize(Line(style).label("   risk: ").add(risk, "bad").text, width))
    if v.budget is not None:  # where the step's time goes: the numbers the verdict is from
        tag = f"  [{v.budget.source}]"
        shares = budget_line(v.budget, max(20, width - 11 - len(tag)))
        lines.append(Line(style).label("   step: ").add(shares).label(tag).text)
    for e in [e for e in p.evidence if e.supports][: 0 if compact else 3]:
        line = Line(style).label("   - ").add(e.text).label(f"  [{e.source}]").text
        lines.append(ellipsize(line, width))
    if said_.levers:
        first = said_.levers[0]
        gain = p.saving is not None and compact  # one line: the speedup before the lever
        lever = (
            Line(style)
            .label(f"   try (~{p.saving.speedup:.2g}x): " if gain and p.saving else "   try: ")
            .add(first.text, "warn" if level == "bad" else "value")
        )
        if first.saving and not compact:
            lever.label(f" ({first.saving})")
        if len(said_.levers) > 1 and width >= 120:
            lever.label(f"; then {said_.levers[1].text}")
        lines += wrap(lever.text, width, indent=8, max_lines=1 if compact else 2)
    if v.secondary and not compact:
        also = ", ".join(f"{f.bound} ({f.confidence:.0%})" for f in v.secondary[:3])
        line = Line(style).label(f"   also: {also}   (v: the full reasoning)").text
        lines.append(ellipsize(line, width))
    return lines


def reasoning_text(v: Verdict | None, setup: Mapping[str, Any] | None = None) -> str:
    """Every rule, fired or not, with its numbers, after the job's setup as its agent read it
    (``model/setup.setup_of``): what the verdict key opens."""
    if v is None:
        return "No verdict yet: waiting for readings.\n"
    out = [*setup_lines(setup), f"Inputs: {', '.join(v.inputs) or 'none'}"]
    if v.principal:
        p = v.principal
        # as every output says it (render/verdict.py), the cause's own measurements under it
        measured = [f"+ {e.text} [{e.source}]" for e in p.cause.evidence] if p.cause else []
        out.append(f"Principal: {p.bound} ({p.confidence:.0%}): {p.summary}")
        out += said_lines(said(p), "    ", step=measured, missing=True)
    elif v.note:
        out.append(v.note)
    out.append("")
    if v.budget is not None:
        out += [*budget_table(v.budget), ""]
    shown = {f.bound: f for f in v.secondary}  # the principal's cause is said above
    for f in v.findings:  # a secondary finding carries its cause: said with its rule's
        out.extend(_finding(shown.get(f.bound, f)))
    return "\n".join(out) + "\n"


def setup_lines(setup: Mapping[str, Any] | None) -> list[str]:
    """The setup, a line per section: the levers below name these values."""
    if not setup:
        return ["Setup: not known (no agent in the job)", ""]
    out = ["Setup (read from the live job):"]
    for name in ("parallel", "framework", "dataloader"):
        section = setup.get(name)
        if section:
            rest = ", ".join(f"{k}={v}" for k, v in section.items() if k != "kind")
            kind = f"{section['kind']} " if "kind" in section else ""
            out.append(f"  {name}: {kind}{rest}".rstrip())
    torch_keys = ("compiled", "autocast_dtype", "torch_threads", "interop_threads", "torch")
    others = [f"{k}={setup[k]}" for k in torch_keys if setup.get(k) is not None]
    if others:
        out.append(f"  torch: {', '.join(others)}")
    return [*out, ""]


def _finding(f: Finding) -> list[str]:
    state = f"FIRED {f.confidence:.0%}" if f.fired else "not fired"
    return [f"[{state}] {f.bound}: {f.summary}", *said_lines(said(f), "    ", missing=True), ""]


class VerdictPane(Pane):
    """The principal bound, its evidence, the cheapest lever, and how long it has held."""

    ORDER = 10

    def draw(self, state: SessionState, context: Context) -> None:
        self.show(state.verdict, state.verdict_now)

    def __init__(self) -> None:
        super().__init__(id="verdict")
        self.verdict: Verdict | None = None
        self.now = 0.0

    def show(self, verdict: Verdict | None, now: float) -> None:
        self.verdict, self.now = verdict, now
        self.changed()

    def cache_key(self, width: int) -> object:
        return width, self.compact

    @property
    def compact(self) -> bool:
        return self.app.size.height < 32

    def build_lines(self, width: int) -> list[Text]:
        return verdict_lines(self.verdict, self.now, self.style_for, width, self.compact)
