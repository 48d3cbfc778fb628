"""The epoch-start cause (``diagnose/causes/epoch_start.py``): most of the data wait in one
long pause per epoch, from a loader that starts its workers anew each epoch; a wait spread
over every step, or persistent workers, is left to the data slice's general cause."""

from __future__ import annotations

from types import MappingProxyType as M

from builders import agent, step

from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.causes.epoch_start import LEVER
from gputop.model.steps import AgentsSample

COMPUTE = {"forward": 12.0, "backward": 12.0, "optimizer": 1.0}


def job(persistent: bool, pause_ms: float = 900.0, every: int = 20, wait_ms: float = 1.0):
    """80 steps of 25 ms of compute, ``wait_ms`` for each batch and ``pause_ms`` at every
    ``every``-th (an epoch's start), four workers."""
    fp = M({"dataloader": M({"num_workers": 4, "pin_memory": True,
                             "persistent_workers": persistent})})  # fmt: skip
    steps, t = [], 0
    for i in range(80):
        wait = pause_ms if i % every == every - 1 else wait_ms
        phases = {"data_wait": wait, **COMPUTE}
        steps.append(step(i, t, phases, dur_ms=sum(phases.values())))
        t += int(sum(phases.values()) * 1e6)
    sig = reduce_windows(
        [], [], agents=AgentsSample(100, 1.0, 0.0, (agent(100, tuple(steps), fingerprint=fp),))
    )
    v, _ = evaluate(sig, now=10.0)
    assert v.principal is not None and v.principal.bound.startswith("data-input"), v.principal
    return v.principal


def test_pauses_at_each_epochs_start_from_workers_started_anew():
    p = job(persistent=False)
    assert p.cause is not None
    assert p.cause.text == (
        "the data wait comes as a 900-ms pause every ~20 steps (98% of it): each epoch starts "
        "its 4 DataLoader workers anew (persistent_workers=False)"
    ), p.cause.text
    assert p.levers[0] == LEVER
    # the pauses' excess over the 1-ms wait, less up to one batch per worker (4 x ~36 ms)
    assert p.saving is not None and p.saving.low < p.saving.share < p.saving.high, p.saving
    assert p.saving.condition == "if each 900-ms pause became a wait for one batch"


def test_persistent_workers_leave_the_wait_to_the_general_cause():
    p = job(persistent=True)
    assert p.cause is None or "persistent_workers" not in p.cause.text
    assert LEVER not in p.levers


def test_a_wait_on_every_step_is_no_pause():
    p = job(persistent=False, pause_ms=40.0, wait_ms=30.0)
    assert p.cause is None or "pause" not in p.cause.text
