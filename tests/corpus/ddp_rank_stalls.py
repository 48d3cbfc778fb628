"""DDP under torchrun where one rank stops coming back: after a few seconds rank 1 waits on a
queue nobody feeds (a data prefetcher that died), so rank 0 waits in the all-reduce for good."""

import argparse
import queue
import time

import torch
import torch.distributed as dist
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
p.add_argument("--stall-after", type=float, default=8)
args = p.parse_args()
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.set_num_threads(1)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
prefetched: queue.Queue = queue.Queue()
start = time.monotonic()
while time.monotonic() - start < args.seconds:
    if rank == 1 and time.monotonic() - start > args.stall_after:
        x, y = prefetched.get()  # the prefetch thread is gone: this never returns
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
