"""What the check's jobs share: their arguments, device, the line each says first, the loop.

Plain torch, no gputop: the jobs are what a user runs. Without CUDA (``--dry``, CI) each runs
its CPU shape: the same loop, smaller, so gputop watches the same kind of process.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

import torch


def setup(what: str) -> tuple[argparse.Namespace, torch.device, bool]:
    p = argparse.ArgumentParser(description=what)
    p.add_argument("--seconds", type=float, default=45.0)
    args = p.parse_args()
    cuda = torch.cuda.is_available()
    torch.set_num_threads(1 if not cuda else min(4, torch.get_num_threads()))
    device = torch.device("cuda" if cuda else "cpu")
    # the check reads this line back: a job must not be able to import the gputop it is
    # diagnosed by (it runs where the user's job would, with no gputop installed)
    print(
        f"gpu-check-job: torch {torch.__version__} device {device} "
        f"gputop importable: {importlib.util.find_spec('gputop') is not None}",
        file=sys.stderr,
        flush=True,
    )
    return args, device, cuda


DRY_DUTY = 1 / 3
"""Without CUDA (``--dry``) a job computes this share of its time and sleeps the rest: four jobs
and their gputops share CI's two cores (the check is of the steps, not of a verdict)."""


def train(args: argparse.Namespace, step) -> None:
    """Call ``step()`` until ``--seconds`` have passed."""
    paced = not torch.cuda.is_available()
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        began = time.monotonic()
        step()
        if paced:
            time.sleep((time.monotonic() - began) * (1 / DRY_DUTY - 1))  # pacing: DRY_DUTY
