"""DDP with torch.multiprocessing.spawn, two equal ranks over gloo, a model whose matmuls are
the step and a gradient that is small next to them. Healthy: compute-bound."""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


def train(rank, world, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # a batch large enough that the all-reduce of 1M gradients (one bucket: none of it
    # overlaps backward) stays a few per cent of the step on a busy 2-CPU machine (2048: 10%)
    x, y = torch.randn(4096, 1024), torch.randint(0, 10, (4096,))
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if rank == 0 and step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--port", type=int, default=29581)
    args = p.parse_args()
    mp.spawn(train, args=(2, args), nprocs=2)
