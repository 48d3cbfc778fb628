"""Samples fetched from slow storage (an object store, a network filesystem): every item waits
about 20 ms for its bytes and costs almost no CPU. Two workers cannot hide it."""

import argparse
import time

import torch
from _clocks import Clocks
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Remote(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        time.sleep(0.02)  # the round trip to the store
        return torch.randn(256), i % 10


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Remote(), batch_size=16, num_workers=2, persistent_workers=True)
    end = time.monotonic() + args.seconds
    clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
    for x, y in clocks.batches(loader):
        with clocks.part("compute"):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if time.monotonic() >= end:
            break


if __name__ == "__main__":
    main()
