"""A training loop with several costs at once, each at a stated share of wall time: batches
from a worker that waits on a slow source (--data), checkpoints (--checkpoint), a validation
pass under no_grad with its own loader (--eval), a slow logging handler (--logging), per-step
Python bookkeeping (--loop), an exponential moving average of the weights kept by torch's
AveragedModel after each step, outside any module's forward or optimizer step (--unmarked:
compute, though no hook marks it), full collections over a large live heap (--gc: gc.collect()
every few steps, as scripts do to keep memory down). What is left is
compute. Each cost is sized against the measured compute as the loop runs (_paced.py), so
the shares hold on a loaded machine too.

    python mixed_loop.py --checkpoint 0.35 --data 0.12 --seconds 60
"""

import argparse
import gc
import itertools
import logging
import multiprocessing as mp
import os
import tempfile
import time

import torch
from _clocks import Clocks
from _paced import Pacer, busy
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, Dataset, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
COSTS = ("data", "checkpoint", "eval", "logging", "loop", "unmarked", "gc")
for cost in COSTS:
    p.add_argument(f"--{cost}", type=float, default=0.0, help="share of wall time")
args = p.parse_args()
torch.set_num_threads(1)
pacer = Pacer({"log" if k == "logging" else k: getattr(args, k) for k in COSTS})
step_wall = mp.Value("d", 0.0)
"""What one step should last in all (compute over its share): the loader's worker paces by it."""


class SlowSource(Dataset):
    """Batches fetched from a slow remote store: the worker waits, it does not compute."""

    def __init__(self, share: float) -> None:
        self.share = share

    def __len__(self) -> int:
        return 10**9

    def __getitem__(self, i: int):
        if self.share:
            time.sleep(step_wall.value)  # one batch per step's worth of wall time
        return torch.randn(64, 512), torch.randint(0, 10, (64,))


class RemoteSink(logging.Handler):
    """Ships each record to a log service that answers slowly."""

    def emit(self, record: logging.LogRecord) -> None:
        with pacer.time("log"):
            time.sleep(pacer.owed("log"))


log = logging.getLogger("train")
log.addHandler(RemoteSink())
log.setLevel(logging.INFO)
log.propagate = False

model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                      nn.Linear(1024, 10))  # fmt: skip
opt = torch.optim.Adam(model.parameters())
# a slow source is read by a worker; batches already in memory are made in the loop (a
# worker's hand-over alone costs a few per cent of the step on a busy 2-CPU machine)
workers = dict(num_workers=1, persistent_workers=True, prefetch_factor=16) if args.data else {}
loader = DataLoader(SlowSource(args.data), batch_size=None, **workers)
val = DataLoader(TensorDataset(torch.randn(2048, 512), torch.randint(0, 10, (2048,))),
                 batch_size=256)  # fmt: skip
out = tempfile.mkdtemp(prefix="corpus-mixed-")
live = [[i, str(i)] for i in range(500_000)] if args.gc else []
"""Per-sample bookkeeping the job keeps in Python lists: every full collection walks it."""


def update_running_stats(seconds: float) -> None:
    """Per-step bookkeeping in Python: moving averages, histograms, a metrics dict."""
    busy(seconds)


ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))


def update_ema(seconds: float) -> None:
    """The weights' moving average after each step (its cost paced by repeating it)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        ema.update_parameters(model)


def evaluate() -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val:
            correct += int((model(x).argmax(1) == y).sum())
    model.train()
    return correct / 2048


clocks = Clocks()
"""The script's own timers (_clocks.py): what the bench compares gputop's budget with."""
end = time.monotonic() + args.seconds
batches = iter(loader)
for step in itertools.count(1):
    with clocks.part("data"):
        x, y = next(batches)
    if time.monotonic() >= end:
        break
    t0 = time.perf_counter()
    with clocks.part("compute"):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    pacer.computed(time.perf_counter() - t0)
    step_wall.value = pacer.compute_s / pacer.compute_share
    if args.unmarked:
        with pacer.time("unmarked"), clocks.part("compute"):
            update_ema(pacer.owed("unmarked"))
    if args.loop:
        with pacer.time("loop"), clocks.part("loop"):
            update_running_stats(pacer.owed("loop"))
    if args.logging:
        with clocks.part("log"):
            log.info("step %d loss %.4f", step, loss.item())
    if pacer.due("gc"):
        with pacer.time("gc"):
            gc.collect()  # "keep memory down": a full collection every few steps
    if pacer.due("eval"):
        with pacer.time("eval"), clocks.part("eval"):
            evaluate()
    if pacer.due("checkpoint"):
        with pacer.time("checkpoint"), clocks.part("checkpoint"):
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step},
                       os.path.join(out, "last.pt"))  # fmt: skip
    clocks.step()
