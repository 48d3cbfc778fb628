"""The agents' steps are reduced once per reading (``signals/rank_steps.py``): every signal,
the budget and the causes read the windows taken there, so no module of the diagnosis
filters (``usable``) or ranks (``ranked``) the same steps a second time."""

from __future__ import annotations

import ast
from pathlib import Path

from builders import agent, step

import gputop.diagnose.signals.rank_steps as rank_steps
from gputop.diagnose import evaluate, reduce_windows
from gputop.model.steps import AgentsSample

DIAGNOSE = Path(rank_steps.__file__).resolve().parents[1]
TAKEN_ONCE = {"usable", "ranked", "main_agent", "rank_work"}
"""What takes a window or ranks the agents: called in rank_steps.py (and the model) only."""


def two_ranks() -> AgentsSample:
    """Rank 1 computes 30 ms a step longer; rank 0 waits for it in the all-reduce."""
    out = []
    for r in (0, 1):
        phases = {"forward": 20.0 + 30.0 * r, "backward": 20.0, "grad_sync": 30.0 * (r == 0)}
        steps = tuple(step(i, int(i * 1e8), phases) for i in range(40))
        out.append(agent(100 + r, steps, rank=r, world_size=2))
    return AgentsSample(target=50, t=1.0, wall=0.0, agents=tuple(out))


def test_one_evaluation_takes_each_agents_windows_once(monkeypatch):
    calls: list[int] = []
    real = rank_steps.usable

    def counted(steps, window=50):
        calls.append(len(steps))
        return real(steps, window)

    monkeypatch.setattr(rank_steps, "usable", counted)
    v, _ = evaluate(reduce_windows([], [], agents=two_ranks()), now=10.0)
    assert v.principal is not None and v.principal.bound == "straggler", v.principal
    assert v.principal.cause is not None  # the causes ran, on the same windows
    assert len(calls) == 2 * 2  # two agents, their recent and their long window each


def test_no_module_of_the_diagnosis_takes_the_windows_again():
    taken = []
    for path in sorted(DIAGNOSE.rglob("*.py")):
        if path.name == "rank_steps.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("gputop.model")
            ):
                taken += [f"{path.relative_to(DIAGNOSE)}: {a.name}" for a in node.names
                          if a.name in TAKEN_ONCE]  # fmt: skip
    assert taken == [], taken
