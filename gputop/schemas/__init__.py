"""The JSON Schemas of gputop's JSON outputs, shipped inside the package so an installed gputop
can show them (``gputop schema NAME``) and tests validate real output against the same files.

What each field means is in the document of the same name (``gputop docs NAME``).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

SCHEMAS = ("diagnose", "snapshot", "report", "capture", "fleet", "compare")
"""What ``gputop schema`` knows: `gputop diagnose --json`, `snapshot --json`, `report --json`,
a capture's manifest.json, `fleet --json` and `compare --json`."""


def schema_text(name: str) -> str:
    """The schema ``name`` as written (one of SCHEMAS)."""
    if name not in SCHEMAS:
        raise KeyError(f"no schema {name!r}: one of {', '.join(SCHEMAS)}")
    return resources.files(__package__).joinpath(f"{name}.schema.json").read_text("utf-8")


def load(name: str) -> dict[str, Any]:
    import json

    return json.loads(schema_text(name))
