"""An armed capture's event in one line, however it is read: the live object
(``arm.armed.ArmEvent``), ``diagnose --json``'s ``armed`` list, or a recording's event (the
report). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputop.model.shown import printable

FIELD_MAX = 300
"""Characters of a field shown at most (a recording's events may be crafted)."""


def event_text(e: Mapping[str, Any]) -> str:
    """``armed <trigger>: <what> [<kind>] [-> <folder>] [(<why>)]``."""

    def field(name: str) -> str:
        v = e.get(name)
        return printable(v, FIELD_MAX) if isinstance(v, str) else ""

    head = f"armed {field('trigger') or 'capture'}: {field('what')}"
    if field("kind"):
        head += f" {field('kind')}"
    tail = f" -> {field('folder')}" if field("folder") else ""
    return f"{head}{tail}" + (f" ({field('why')})" if field("why") else "")
