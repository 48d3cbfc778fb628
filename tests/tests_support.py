"""Paths shared by tests (kept out of conftest so test modules can import them)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("GPUTOP_FIXTURES", REPO.parent / "shared" / "fixtures"))
