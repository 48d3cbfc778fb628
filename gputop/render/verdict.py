"""A finding as every output says it: built once (``Said``) from the verdict's objects, from a
diagnosis's JSON or from a report's entry, then skinned as text lines (``gputop diagnose``, the
reasoning screen, the text report) or HTML (the report page). The TUI's pane reads the same
fields, fitted to its width. So "why:", the evidence, "try:" and a lever's saving read the
same wherever the user meets them.

A recording or a report may be crafted: the JSON forms are read defensively (a field of the
wrong type reads as absent) and every text is bounded."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gputop.diagnose import Finding, Saving, saving_text

Bounded = Callable[[Sequence[Any], Callable[[Any], str], str], list[str]]
"""``bounded(items, render, what)``: at most so many items rendered, and a line for the rest."""
TEXT_MAX = 2000
"""Characters kept of any text read from a file (a crafted one may hold megabytes)."""


@dataclass(frozen=True, slots=True)
class SaidEvidence:
    """A line of evidence: what was measured, by which source, for or against the bound."""

    text: str
    source: str
    supports: bool = True


@dataclass(frozen=True, slots=True)
class SaidLever:
    """A lever as the user reads it, with what it would save in this job."""

    text: str
    saving: str | None = None
    """What it would save, as ``saving_text`` says it (None: not sized)."""


@dataclass(frozen=True, slots=True)
class Said:
    """A finding's words: its bound and how sure, its summary, its cause (the second why), the
    evidence, the levers with their savings, what it was judged without."""

    bound: str
    confidence: float | None
    summary: str
    why: str | None
    evidence: tuple[SaidEvidence, ...] = ()
    levers: tuple[SaidLever, ...] = ()
    missing: tuple[str, ...] = ()


# ---- built once ----------------------------------------------------------------------------


def said(f: Finding) -> Said:
    """From the verdict's own objects (the screen, the reasoning screen)."""
    savings = f.lever_savings
    return Said(
        bound=f.bound,
        confidence=f.confidence,
        summary=f.summary,
        why=f.cause.text if f.cause is not None else None,
        evidence=tuple(SaidEvidence(e.text, e.source, e.supports) for e in f.evidence),
        levers=tuple(
            SaidLever(str(lever), _saving_said(savings[i] if i < len(savings) else None))
            for i, lever in enumerate(f.levers)
        ),
        missing=tuple(f.missing),
    )


def _saving_said(x: Saving | None) -> str | None:
    return x.text if x is not None else None


def said_of_json(f: Mapping[str, Any]) -> Said:
    """From a finding as a diagnosis's JSON or a recording holds it (``jsonable(Finding)``):
    the cause as an object with its text, each lever's saving as numbers."""
    cause = f.get("cause")
    # each lever's saving; a document with only the first's (``saving``) gives that one
    savings = f.get("lever_savings") or [f.get("saving")]
    levers = _texts(f.get("levers"))
    return Said(
        bound=_text(f.get("bound")) or "?",
        confidence=_number(f.get("confidence")),
        summary=_text(f.get("summary")) or "",
        why=_text(cause.get("text")) if isinstance(cause, Mapping) else None,
        evidence=_evidence(f.get("evidence")),
        levers=tuple(SaidLever(lever, _saving(_nth(savings, i))) for i, lever in enumerate(levers)),
        missing=_texts(f.get("missing")),
    )


def said_of_entry(f: Mapping[str, Any]) -> Said:
    """From a report's finding entry (``gputop report --json``): the cause as its text, each
    lever's saving as its text already."""
    savings = f.get("savings")
    levers = _texts(f.get("levers"))
    return Said(
        bound=_text(f.get("bound")) or "?",
        confidence=_number(f.get("confidence")),
        summary=_text(f.get("summary")) or "",
        why=_text(f.get("cause")),
        evidence=_evidence(f.get("evidence")),
        levers=tuple(SaidLever(lever, _text(_nth(savings, i))) for i, lever in enumerate(levers)),
    )


def saving_of_json(x: Any) -> str | None:
    """A lever's saving read from JSON, as every output says it (None: not a saving)."""
    return _saving(x)


# ---- skinned: text ---------------------------------------------------------------------------


def said_lines(
    s: Said,
    indent: str,
    *,
    step: Sequence[str] = (),
    evidence: bool = True,
    missing: bool = False,
    levers: int | None = None,
) -> list[str]:
    """The finding below its head line: why, the step's budget (``step``, lines made by the
    caller), the evidence, what it was judged without (``missing``), and each lever with its
    saving (the first ``levers`` of them; None: all)."""
    out = [f"{indent}why: {s.why}"] if s.why else []
    out += [f"{indent}{line}" for line in step]
    if evidence:
        out += [f"{indent}{'+' if e.supports else '-'} {e.text} [{e.source}]" for e in s.evidence]
    if missing and s.missing:
        out.append(f"{indent}(without: {', '.join(s.missing)})")
    for lever in s.levers[:levers]:
        out.append(f"{indent}try: {lever.text}" + (f"  ({lever.saving})" if lever.saving else ""))
    return out


# ---- skinned: HTML ---------------------------------------------------------------------------


def said_html(
    s: Said, escape: Callable[[str], str] = html.escape, bounded: Bounded | None = None
) -> list[str]:
    """The finding's why, evidence and levers as HTML. ``escape``: how a text becomes HTML (the
    page's cuts a long one and says so); ``bounded``: how the page bounds a list (a crafted
    file may hold a million entries); None: every item."""

    def each(items: Sequence[Any], render: Callable[[Any], str], what: str) -> list[str]:
        return bounded(items, render, what) if bounded is not None else [render(x) for x in items]

    def evidence(e: SaidEvidence) -> str:
        mark, cls = ("+", "") if e.supports else ("&minus;", ' class="against"')
        source = f'<span class="meta">[{escape(e.source[:40])}]</span>'
        return f"<li{cls}>{mark} {escape(e.text)} {source}</li>"

    def lever(x: SaidLever) -> str:
        return (
            f"<li>{escape(x.text)}"
            + (f" <i>({escape(x.saving)})</i>" if x.saving else "")
            + "</li>"
        )

    out = [f"<p><b>why:</b> {escape(s.why)}</p>"] if s.why else []
    if s.evidence:
        out += ["<p><b>evidence</b></p><ul>", *each(s.evidence, evidence, "evidence"), "</ul>"]
    if s.levers:
        out += [
            "<p><b>levers</b> (cheapest first)</p><ul>",
            *each(s.levers, lever, "levers"),
            "</ul>",
        ]
    return out


# ---- reading JSON that may be crafted ----------------------------------------------------------


def _text(x: Any) -> str | None:
    return x[:TEXT_MAX] if isinstance(x, str) else None


def _texts(xs: Any) -> tuple[str, ...]:
    return tuple(t for t in (_text(x) for x in _items(xs)) if t is not None)


def _items(xs: Any) -> Iterable[Any]:
    return xs if isinstance(xs, list | tuple) else ()


def _nth(xs: Any, i: int) -> Any:
    return xs[i] if isinstance(xs, list) and i < len(xs) else None


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _share(x: Any) -> float:
    """A share read from JSON: a number in 0..1, else 0 (not said)."""
    n = _number(x)
    return n if n is not None and 0 <= n <= 1 else 0.0


def _evidence(xs: Any) -> tuple[SaidEvidence, ...]:
    out = []
    for e in _items(xs):
        if isinstance(e, Mapping) and isinstance(e.get("text"), str):
            supports = e.get("supports", True)
            out.append(SaidEvidence(e["text"][:TEXT_MAX], _text(e.get("source")) or "?",
                                    supports if isinstance(supports, bool) else True))  # fmt: skip
    return tuple(out)


def _saving(x: Any) -> str | None:
    if not isinstance(x, Mapping) or not isinstance(x.get("condition"), str):
        return None
    speedup = _number(x.get("speedup"))
    if speedup is None or not speedup >= 1:
        return None
    low, high = _share(x.get("low")), _share(x.get("high"))
    return saving_text(speedup, x["condition"][:200], low, max(low, high))
