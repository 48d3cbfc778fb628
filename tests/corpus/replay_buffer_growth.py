"""An off-policy trainer whose actors hand it rollouts at a steady rate (about 8 MiB a second);
it keeps every one in a replay buffer "to sample from later" and never trims it. The step
itself is healthy compute, but the process grows toward its container's memory limit, where
it will be OOM-killed. Nothing is slow yet; the job will end."""

import argparse
import random
import time

import torch
from torch import nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--rollouts-mib-s", type=float, default=8.0, help="what the actors send")
    args = p.parse_args()
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 10))  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    replay, kept = [], 0
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        arrived = int(args.rollouts_mib_s * (time.monotonic() - start) * (1 << 20)) - kept
        if arrived >= 16 * 256 * 4:  # the rollouts the actors sent since the last step
            replay.append(torch.randn(arrived // 4))
            kept += arrived // 4 * 4
        if not replay:
            continue
        batch = random.choice(replay)[: 16 * 256].view(16, 256)
        y = torch.randint(0, 10, (16,))
        loss = nn.functional.cross_entropy(model(batch), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
