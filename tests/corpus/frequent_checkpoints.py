"""A loop that saves a full checkpoint (model and optimizer state, ~100 MB) every 4 steps to
local disk: the saves, not the steps, are where the time goes (about 30% of wall time here;
every 10 steps it was 12-15%, near the 10% a loss needs to lead, and the verdict flipped)."""

import argparse
import os
import tempfile
import time

import torch
from _clocks import Clocks
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
p.add_argument("--every", type=int, default=4, help="steps between checkpoints")
args = p.parse_args()
torch.set_num_threads(1)
model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(8)])
opt = torch.optim.Adam(model.parameters())
x = torch.randn(16, 1024)
out = tempfile.mkdtemp(prefix="ckpt-")
clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
end, step = time.monotonic() + args.seconds, 0
while time.monotonic() < end:
    with clocks.part("compute"):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    step += 1
    if step % args.every == 0:
        with clocks.part("checkpoint"):
            path = os.path.join(out, "last.pt")
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, path)
    clocks.step()
