"""Every scenario of the verdict corpus in both modes (started by `gputop diagnose -- CMD`,
and started plainly then attached by PID): the final principal is one it expects, no bound it
must never get was shown, its cause line names the cause it is built with, and no lever is
for a setup the job lacks. About two hours on two cores, so it runs only when asked:
`GPUTOP_CORPUS=all pytest tests/scenarios/test_corpus_every_scenario.py` (add
`GPUTOP_CORPUS_GPUTOP=/path/to/gputop` and `GPUTOP_CORPUS_PYTHON=/path/to/python` to run gputop
from its own install and the jobs in another environment). CI runs a subset
(test_corpus_subset.py, test_separate_install.py); the bench prints the same checks as a table
(tests/bench/bench_verdicts.py)."""

from __future__ import annotations

import os

import pytest
from harness import Harness, unfit
from scenarios import SCENARIOS, by_name

from gputop.sources.stacks import find_py_spy

pytest.importorskip("torch")
if os.environ.get("GPUTOP_CORPUS") != "all":
    pytest.skip("the whole corpus runs only with GPUTOP_CORPUS=all", allow_module_level=True)

WATCH_S = 40.0
"""As the bench's default: the longest onset (13 s of warm-up) plus a hang's 10 s, with room."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed"),
]


corpus = Harness(
    gputop=(os.environ["GPUTOP_CORPUS_GPUTOP"],)
    if os.environ.get("GPUTOP_CORPUS_GPUTOP")
    else Harness.gputop,
    job_python=os.environ.get("GPUTOP_CORPUS_PYTHON") or Harness.job_python,
)
"""gputop's own install and the jobs' Python, when given."""


@pytest.mark.parametrize("mode", ["run", "attached"])
@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_every_scenario(name, mode):
    s = by_name(name)
    result = (corpus.run_mode if mode == "run" else corpus.attached_mode)(s, WATCH_S)
    if s.memory_mib:
        corpus.remove_cgroups()
    seen = " ".join(f"{t:.0f}s:{b}" for t, b in result.timeline) or result.problem
    assert result.final in s.expected, seen
    assert not result.never_seen, seen
    assert result.cause_right is not False, (result.cause, seen)
    assert result.risk_right is not False, (result.risks, seen)
    assert not unfit(result), (result.levers, result.setup)
