"""Every 16 steps the script preprocesses the next shard by running an external tool
with subprocess.run and waits for it. After --stuck-after seconds the tool never finishes
(modelled by `sleep 3600`: a tool stuck on a lock file or a prompt), so the main thread waits in
subprocess.run for good while nothing trains."""

import argparse
import subprocess
import time

import torch
from torch import nn


def preprocess_shard(shard, stuck):
    cmd = ["sleep", "3600"] if stuck else ["true"]  # stands for e.g. `tar -x` of the next shard
    subprocess.run(cmd, check=True)
    return torch.randn(16 * 256, 512), torch.randint(0, 10, (16 * 256,))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = time.monotonic()
    shard = 0
    while time.monotonic() - start < args.seconds:
        stuck = time.monotonic() - start > args.stuck_after
        data, labels = preprocess_shard(shard, stuck)
        for i in range(0, len(data), 256):
            loss = nn.functional.cross_entropy(model(data[i : i + 256]), labels[i : i + 256])
            opt.zero_grad()
            loss.backward()
            opt.step()
        shard += 1
        print(f"shard {shard} loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
