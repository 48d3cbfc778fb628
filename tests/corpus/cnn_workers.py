"""A small CNN on 32x32 images held in memory, read by a DataLoader with two workers that only
flip and normalise: the workers keep up easily and the convolutions are the step. Healthy."""

import argparse
import time

import torch
from _clocks import Clocks
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, n=20_000):
        g = torch.Generator().manual_seed(0)
        self.images = torch.rand(n, 3, 32, 32, generator=g)
        self.labels = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = self.images[i]
        if i % 2:
            img = img.flip(-1)
        return (img - 0.5) / 0.25, self.labels[i]


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128 * 8 * 8, 10),
    )  # fmt: skip


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    torch.set_num_threads(1)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(Images(), batch_size=32, shuffle=True, num_workers=2,
                        persistent_workers=True)  # fmt: skip
    clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
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
