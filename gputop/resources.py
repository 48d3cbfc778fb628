"""Where files shipped with gputop live, installed from a wheel or run from a checkout."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def bundled_themes_dir() -> Path:
    """``gputop/themes`` inside an installed wheel, else ``themes/`` of the source checkout."""
    inside = PACKAGE / "themes"
    if inside.is_dir():
        return inside
    return PACKAGE.parent / "themes"


def bundled_examples_dir() -> Path:
    """The example trainers (``gputop/examples`` in a wheel, ``examples/`` in a checkout)."""
    inside = PACKAGE / "examples"
    if inside.is_dir():
        return inside
    return PACKAGE.parent / "examples"


DOCS = {
    "diagnose": "diagnose.md",
    "snapshot": "snapshot.md",
    "report": "report.md",
    "captures": "captures.md",
    "prometheus": "prometheus.md",
    "recording": "recording.md",
    "agent-wire": "agent-wire.md",
    "fleet": "fleet.md",
    "compare": "compare.md",
}
"""What `gputop docs NAME` prints (pyproject ships each in the wheel: a test holds them)."""


def bundled_docs_dir() -> Path:
    """The documents --help and `gputop docs` name (``gputop/docs`` in a wheel, ``docs/`` in a
    checkout)."""
    inside = PACKAGE / "docs"
    if inside.is_dir():
        return inside
    return PACKAGE.parent / "docs"
