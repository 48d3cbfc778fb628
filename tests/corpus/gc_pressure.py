"""Every step builds per-sample bookkeeping as small Python objects that point at each other
(parent/child links, a cycle per sample) and keeps the last 200 steps of it for debugging. The
heap of tracked objects grows large and Python's cyclic garbage collector runs full collections
over it every few steps: periodic pauses that have nothing to do with the model."""

import argparse
import collections
import gc
import time

import torch
from _clocks import Clocks
from torch import nn


class Record:
    def __init__(self, step, index, parent=None):
        self.step, self.index, self.parent, self.children = step, index, parent, []
        if parent is not None:
            parent.children.append(self)


def bookkeeping(step, n=2000):
    root = Record(step, -1)
    for i in range(n):
        leaf = Record(step, i, root)
        leaf.meta = {"len": i % 512, "source": f"shard-{i % 16}", "owner": leaf}
    return root


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--gc-threshold", default="", help="gc.set_threshold(*these), e.g. 50000,20,20")
    args = p.parse_args()
    if args.gc_threshold:
        gc.set_threshold(*(int(x) for x in args.gc_threshold.split(",")))
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 512), torch.randint(0, 10, (512,))
    recent = collections.deque(maxlen=200)
    end, step = time.monotonic() + args.seconds, 0
    clocks = Clocks()  # the script's own timers (_clocks.py; its collections by gc.callbacks)
    while time.monotonic() < end:
        with clocks.part("compute"):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        step += 1
        with clocks.part("loop"):
            recent.append(bookkeeping(step))
        clocks.step()


if __name__ == "__main__":
    main()
