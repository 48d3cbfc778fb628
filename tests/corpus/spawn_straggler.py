"""Two ranks with torch.multiprocessing.spawn and DDP over gloo; rank 1 runs on a slower node
(modelled as extra CPU work before each forward), so rank 0 waits for it in every all-reduce.
With --slow-after S, rank 1 turns slow only S seconds in (a neighbour's job arrives); with
--gpu-ms M each step also waits M ms on both ranks, as for the GPU's share of a real step."""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


def work(ms):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def train(rank, world, seconds, port, slow_after=0.0, gpu_ms=0.0):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 256), torch.randint(0, 10, (32,))
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        if rank == 1 and time.monotonic() - start >= slow_after:
            work(30)
        if gpu_ms:
            time.sleep(gpu_ms / 1000)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--port", type=int, default=29561)
    p.add_argument("--slow-after", type=float, default=0.0)
    p.add_argument("--gpu-ms", type=float, default=0.0)
    a = p.parse_args()
    mp.spawn(train, args=(2, a.seconds, a.port, a.slow_after, a.gpu_ms), nprocs=2)
