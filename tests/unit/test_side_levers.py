"""Side work's first lever names the framework's own interval with its next value (the
setting the user would change), and the saving says what that assumes."""

from __future__ import annotations

from types import MappingProxyType as M

import pytest
from builders import agent, step

from gputop.diagnose import evaluate, reduce_windows
from gputop.model.steps import AgentsSample

PHASES = {"forward": 20.0, "backward": 20.0, "optimizer": 2.0}


def job(framework: dict | None, every: int = 4) -> AgentsSample:
    """One process; every ``every``-th step carries 120 ms of evaluation."""
    steps = []
    for i in range(40):
        phases = {**PHASES, **({"eval": 120.0} if i % every == 0 else {})}
        steps.append(step(i, int(i * 1e9), phases))
    fp = M({"framework": M(framework)} if framework else {})
    return AgentsSample(target=1, t=1.0, wall=0.0, agents=(agent(1, tuple(steps), fingerprint=fp),))


def principal(framework: dict | None):
    v, _ = evaluate(reduce_windows([], [], agents=job(framework)), now=10.0)
    assert v.principal is not None and v.principal.bound == "side-work", v.principal
    return v.principal


@pytest.mark.parametrize(("framework", "first"), [
    ({"kind": "lightning.Trainer", "val_check_interval": 50, "check_val_every_n_epoch": 1},
     "Trainer(val_check_interval=50 -> 100): validate half as often"),
    ({"kind": "lightning.Trainer", "val_check_interval": 1.0, "check_val_every_n_epoch": 1},
     "Trainer(check_val_every_n_epoch=1 -> 2), or limit_val_batches"),
    ({"kind": "transformers.Trainer", "eval_steps": 500, "eval_strategy": "steps"},
     "TrainingArguments(eval_steps=500 -> 1000): half as often"),
])  # fmt: skip
def test_the_frameworks_interval_is_the_first_lever(framework, first):
    p = principal(framework)
    assert p.levers[0].startswith(first), p.levers
    assert p.saving.condition == "if it evaluated half as often"


def test_a_plain_loop_gets_no_framework_setting():
    p = principal(None)
    assert p.levers[0].startswith("evaluate less often"), p.levers
    assert not any("Trainer(" in x or "TrainingArguments" in x for x in p.levers)
