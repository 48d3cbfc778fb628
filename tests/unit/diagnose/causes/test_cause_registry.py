"""One shape for a cause: every loss slice of the budget has a registered finder, and every
registered finder's module has its own test file here (ARCHITECTURE.md, "How to add a cause")."""

from __future__ import annotations

from pathlib import Path

from gputop.diagnose.causes import CAUSES, EXPLAINED
from gputop.vocab import budget as slices

HERE = Path(__file__).parent


def test_every_loss_slice_has_a_registered_cause():
    assert sorted(set(slices.LOSSES) - EXPLAINED) == []
    assert sorted(EXPLAINED - set(slices.LOSSES)) == []


def test_every_registered_cause_has_its_test_file():
    modules = {f.__module__.rsplit(".", 1)[-1] for _, f in CAUSES}
    missing = sorted(m for m in modules if not (HERE / f"test_cause_{m}.py").is_file())
    assert missing == [], f"add tests/unit/diagnose/causes/test_cause_<module>.py for: {missing}"
