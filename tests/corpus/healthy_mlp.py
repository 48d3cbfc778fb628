"""A healthy loop: the batches are already in memory, the model is big enough that the matmuls
are the step. Nothing is wrong; the answer should be compute-bound, not a false alarm."""

import argparse
import time

import torch
from _clocks import Clocks
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(
    nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)
)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(128, 1024), torch.randint(0, 10, (128,))
clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
end = time.monotonic() + args.seconds
while time.monotonic() < end:
    with clocks.part("compute"):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    clocks.step()
