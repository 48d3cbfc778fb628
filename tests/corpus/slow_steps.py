"""A big model on a small machine: each step is about 4-6 s of real compute (large matmuls in
forward and backward). Steps are rare but every one completes: slow, not stuck."""

import argparse
import time

import torch
from _clocks import Clocks
from torch import nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--batch", type=int, default=1024)
    args = p.parse_args()
    torch.manual_seed(0)
    width = 4096
    model = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(4)])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(args.batch, width)
    end, step = time.monotonic() + args.seconds, 0
    clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
    while time.monotonic() < end:
        t = time.monotonic()
        with clocks.part("compute"):
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        step += 1
        with clocks.part("log"):
            print(f"step {step} loss {loss.item():.4f} {time.monotonic() - t:.1f} s", flush=True)
        clocks.step()


if __name__ == "__main__":
    main()
