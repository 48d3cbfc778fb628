"""The side work's causes (``diagnose/causes/side.py``: evaluation, checkpointing, logging):
how often each comes and how long a pass takes, from the typical rank's own steps, what the
main thread does in it, and the interval lever sized from those numbers."""

from __future__ import annotations

from builders import agent, stacks_window, step

from gputop.diagnose import evaluate, reduce_windows
from gputop.model.steps import AgentsSample

BASE = {"data_wait": 1.0, "forward": 20.0, "backward": 20.0, "optimizer": 2.0}


def job(side: dict[str, float], every: int, n: int = 60) -> AgentsSample:
    steps = tuple(
        step(i, int(i * 1e9), {**BASE, **(side if i % every == 0 else {})}) for i in range(n)
    )
    return AgentsSample(100, 1.0, 0.0, (agent(100, steps),))


def principal(agents, stacks=None):
    v, _ = evaluate(reduce_windows([], [], agents=agents, stacks=stacks), now=10.0)
    assert v.principal is not None and v.principal.bound == "side-work", v.principal
    return v.principal


def test_an_eval_pass_is_said_with_its_cadence_and_its_length():
    p = principal(job({"eval": 400.0}, every=10))
    assert (
        p.cause.text == "an evaluation pass every ~10 steps takes 400 ms (5 in the last 59 steps)"
    )
    assert p.levers[0] == "evaluate every ~20 steps instead of every ~10"
    assert p.saving is not None
    assert p.saving.condition == "if its 400-ms passes came every 20 steps, not 10"
    # half the eval slice: 400 ms in 5 of the 59 steps of ~43 ms
    eval_share = 5 * 400 / (59 * 43 + 5 * 400)
    assert abs(p.saving.share - eval_share / 2) < 0.02, p.saving


def test_a_checkpoint_that_pickles_names_serialisation_and_an_async_save():
    save = (
        ("pickle.py", "_Pickler.dump"),
        ("torch/serialization.py", "_save"),
        ("torch/serialization.py", "save"),
        ("train.py", "save_state"),
        ("train.py", "main"),
    )
    stacks = stacks_window({(100, "main"): [save]})
    p = principal(job({"checkpoint": 300.0}, every=4), stacks)
    assert p.cause.text.startswith("a checkpoint every ~4 steps takes 300 ms"), p.cause.text
    assert "in save_state (train.py:13) -> pickle.py:_Pickler.dump: serialisation" in p.cause.text
    assert any(x.startswith("save asynchronously") for x in p.levers), p.levers


def test_logging_every_step_has_no_interval_to_double():
    p = principal(job({"log": 30.0}, every=1))
    assert p.cause.text == "logging every step takes 30 ms"
    assert not any("steps instead of every" in x for x in p.levers), p.levers
