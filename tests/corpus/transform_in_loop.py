"""Augmentation done in the training process: a Dataset whose __getitem__ does real CPU work,
read with num_workers=0, so every batch is prepared by the main thread while nothing trains."""

import argparse
import time

import torch
from _clocks import Clocks
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Augmented(Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        img = torch.randn(3, 64, 64)
        for _ in range(6):  # a stack of cheap augmentations, done one image at a time
            img = torch.nn.functional.avg_pool2d(img.unsqueeze(0), 3, 1, 1).squeeze(0)
            img = img.flip(-1) * 1.01
        return img.flatten()[:512], i % 10


p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
args = p.parse_args()
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters())
clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
end = time.monotonic() + args.seconds
while time.monotonic() < end:
    for x, y in clocks.batches(DataLoader(Augmented(), batch_size=32, shuffle=True, num_workers=0)):
        with clocks.part("compute"):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if time.monotonic() >= end:
            break
