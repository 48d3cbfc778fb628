"""Text another process wrote (a command line, a path), made safe to show: one line, printable,
bounded. Such text is only ever shown, never trusted: an escape sequence in a crafted command
line must not reach the user's terminal, and a long one must not fill the screen."""

from __future__ import annotations

MAX_SHOWN = 200
"""Characters kept by default."""


def printable(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` as one safe line: control characters replaced, cut to ``limit``."""
    clean = "".join(c if c.isprintable() else "?" for c in text[: limit + 1])
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"
