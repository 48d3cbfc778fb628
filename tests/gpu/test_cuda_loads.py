"""A CUDA load that cannot start says why in one line, and the check goes on without it."""

from __future__ import annotations

import sys

import pytest
from cuda_loads import start, stop

pytest.importorskip("torch")


@pytest.mark.slow
def test_a_load_without_cuda_ends_in_one_line_and_leaves_nothing_running():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the load would start")
    proc, why = start("tiny", sys.executable)
    stop(proc)
    assert proc is None
    assert why == "the tiny load ended before it was ready: AssertionError: no CUDA device", why
