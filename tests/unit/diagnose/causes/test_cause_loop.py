"""The loop's own Python (``diagnose/causes/loop.py``): the job's functions the main thread
runs between the training phases, by share and kind."""

from __future__ import annotations

from builders import stacks_window

from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.budget import budget_of
from gputop.diagnose.causes import loop

FORWARD = (("torch/nn/modules/module.py", "Module._call_impl"), ("train.py", "main"))
METRICS = (("json/encoder.py", "JSONEncoder.encode"), ("json/__init__.py", "dumps"),
           ("train.py", "write_metrics"), ("train.py", "main"))  # fmt: skip
BOOKKEEPING = (("train.py", "tally"), ("train.py", "main"))


def test_the_functions_and_their_kind_are_named():
    sig = reduce_windows(
        [], [], stacks=stacks_window({(100, "main"): [FORWARD, METRICS, METRICS, BOOKKEEPING]})
    )
    v, _ = evaluate(sig, now=10.0)
    assert v.principal is not None and v.principal.bound == "host-overhead", v.principal
    text = v.principal.cause.text
    assert text.startswith("the loop's own Python between the phases: ")
    assert (
        "in write_metrics (train.py:12) -> json/encoder.py:JSONEncoder.encode: serialisation"
        in text
    )


def test_no_samples_in_its_own_code_is_no_cause():
    sig = reduce_windows([], [], stacks=stacks_window({(100, "main"): [FORWARD]}))
    assert loop.find(sig, budget_of(sig)) is None
