"""The one table of a summary's shape (record/summary_shape.py): a summary the accumulator
takes is of that shape, and one part of another type, anywhere, is not; parts written only by
newer versions may be absent."""

from __future__ import annotations

import copy
import json

import pytest
from builders import agent, gpu_sample, step

from gputop.diagnose import EvalPoint, Evidence, Finding, Verdict
from gputop.model.steps import AgentsSample
from gputop.record.summary import Accumulator
from gputop.record.summary_shape import BUDGET_POINT, SUMMARY_SHAPE

T0 = 1000.0


def taken() -> dict:
    """A minute's summary as the recorder writes it (through JSON, as a file holds it)."""
    acc = Accumulator()
    lead = Finding("data-input", True, 0.7, "waits", (Evidence("98%", "agent"),), ("workers",))
    for k in range(5):
        t = T0 + k
        acc.gpu([gpu_sample(0, t)])
        steps = tuple(step(n, int(n * 1e8), {"forward": 60, "data_wait": 40}) for n in range(k + 3))
        acc.agents(AgentsSample(target=100, t=t, wall=1e9 + t, agents=(agent(100, steps),)))
        acc.verdict(EvalPoint(t), Verdict(lead, (), (lead,), T0, "", ("agent",)))
    return json.loads(json.dumps(acc.take()))


def test_a_summary_the_recorder_takes_has_the_shape():
    assert SUMMARY_SHAPE(taken())


@pytest.mark.parametrize(
    "path",
    [("verdict_s", "data-input"), ("findings", "data-input", "confidence"),
     ("findings", "data-input", "levers"), ("changes", 0), ("ranks", "0", "hist"),
     ("gpus", "0", "power"), ("carry",), ("t0",)],
)  # fmt: skip
def test_one_part_of_another_type_is_refused(path):
    s = taken()
    part = s
    for key in path[:-1]:
        part = part[key]
    part[path[-1]] = "not its type"
    assert not SUMMARY_SHAPE(s), path


@pytest.mark.parametrize("typical", [[], {}, 0, None, "9"])
def test_an_intervals_typical_rank_that_is_no_rank_key_is_refused(typical):
    # found by the fuzz test: a list there raised TypeError (unhashable), not damage
    point = {"start": 1.0, "typical": "0", "ranks": {"0": [1.5, 15, {"compute": 1.0}]}}
    assert BUDGET_POINT(point)
    assert not BUDGET_POINT({**point, "typical": typical})


@pytest.mark.parametrize("key", ["budget_s", "beside", "points", "budget_points", "gpu_points"])
def test_a_part_older_files_lack_may_be_absent(key):
    s = copy.deepcopy(taken())
    s.pop(key, None)
    assert SUMMARY_SHAPE(s)


def test_a_start_without_an_end_is_refused():
    s = taken()
    s["t1"] = None
    assert not SUMMARY_SHAPE(s)
