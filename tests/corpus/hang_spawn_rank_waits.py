"""DDP with torch.multiprocessing.spawn, two ranks over gloo. After --stuck-after seconds rank 1
waits for a background evaluation thread that crashed (an Event nobody sets), so it never
reaches its next backward; rank 0 waits in the gradient all-reduce for good."""

import argparse
import os
import threading
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
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 512), torch.randint(0, 10, (512,))
    eval_done = threading.Event()
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        if rank == 1 and time.monotonic() - start > args.stuck_after:
            eval_done.wait()  # the eval thread died before setting it
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    p.add_argument("--port", type=int, default=29571)
    args = p.parse_args()
    mp.spawn(train, args=(2, args), nprocs=2)
