"""The H2D copies' cause (``diagnose/causes/h2d.py``): pageable or pinned batches, read from
the live job's DataLoader."""

from __future__ import annotations

from types import MappingProxyType as M

from builders import agent, step

from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.budget import budget_of
from gputop.diagnose.causes import h2d
from gputop.model.steps import AgentsSample


def sig(pin: bool | None):
    fp = M({"dataloader": M({"num_workers": 2, "pin_memory": pin})}) if pin is not None else M({})
    steps = tuple(step(i, int(i * 1e9), {"h2d": 30.0, "forward": 20.0, "backward": 20.0})
                  for i in range(30))  # fmt: skip
    return reduce_windows(
        [], [], agents=AgentsSample(100, 1.0, 0.0, (agent(100, steps, fingerprint=fp),))
    )


def test_pageable_batches_are_named_with_both_halves_of_the_lever():
    v, _ = evaluate(sig(False), now=10.0)
    assert v.principal is not None and v.principal.bound == "h2d-copy", v.principal
    assert v.principal.cause.text.startswith(
        "the batches are copied from pageable memory (pin_memory=False) (30 ms a step)"
    )
    assert v.principal.levers[0].startswith("DataLoader(pin_memory=True) and .to(device, non_b")


def test_pinned_batches_point_at_the_overlap():
    s = sig(True)
    cause = h2d.find(s, budget_of(s))
    assert cause is not None and "pinned (pin_memory=True)" in cause.text


def test_an_unknown_setting_is_no_cause():
    s = sig(None)
    assert h2d.find(s, budget_of(s)) is None
