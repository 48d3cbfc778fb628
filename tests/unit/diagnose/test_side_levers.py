"""Side work's first lever names the framework's own interval with its next value (the
setting the user would change), and the saving says what that assumes."""

from __future__ import annotations

from types import MappingProxyType as M

import pytest
from builders import agent, step

from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.causes.garbage import FULLS_GONE
from gputop.model.steps import AgentsSample
from gputop.vocab.budget import JSON_DECIMALS

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
    # its own measured interval: an eval pass every 4th step of the 40
    assert p.levers[0].startswith("evaluate every ~8 steps instead of every ~4"), p.levers
    assert not any("Trainer(" in x or "TrainingArguments" in x for x in p.levers)


def test_each_lever_saves_from_the_slice_it_declares():
    """Eval every 4th step (120 ms) and a garbage collection every 5th (60 ms): the eval's
    levers save from the eval, the collector's from GC, advice from nothing."""
    steps = []
    for i in range(40):
        phases = {**PHASES, **({"eval": 120.0} if i % 4 == 0 else {})}
        gc_ns = 60_000_000 if i % 5 == 0 else 0
        dur = sum(phases.values()) + gc_ns / 1e6
        steps.append(step(i, int(i * 1e9), phases, dur_ms=dur, gc_ns=gc_ns, gc_full=int(gc_ns > 0)))
    sample = AgentsSample(target=1, t=1.0, wall=0.0, agents=(agent(1, tuple(steps)),))
    v, _ = evaluate(reduce_windows([], [], agents=sample), now=10.0)
    p = v.principal
    assert p is not None and p.bound == "side-work", p
    assert len(p.lever_savings) == len(p.levers)
    by_lever = dict(zip(p.levers, p.lever_savings, strict=True))
    less = next(x for x in p.levers if x.startswith("evaluate less often"))
    batch = next(x for x in p.levers if x.startswith("evaluate under torch.inference_mode"))
    threshold = next(x for x in p.levers if x.startswith("gc.set_threshold"))
    eval_share, gc_share = v.budget.share("eval"), v.budget.share("gc")
    assert eval_share > 0.2 and gc_share > 0.05, (eval_share, gc_share)
    assert by_lever[less].share == round(
        eval_share * 0.5, JSON_DECIMALS
    )  # half as often: half the eval
    assert by_lever[less].condition == "if it evaluated half as often"
    assert by_lever[batch] is None  # a larger eval batch: by how much, the budget cannot say
    # sized by the collector's own timings (its cause), under the eval's finding too: every
    # collection here is a full one, and higher thresholds take FULLS_GONE of those away
    assert by_lever[threshold].share == round(gc_share * FULLS_GONE, JSON_DECIMALS)
    assert by_lever[threshold].condition.startswith("if its 7 full collections in 39 steps")
    assert p.saving == p.lever_savings[0]
