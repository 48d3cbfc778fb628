"""One node of a multi-node job: two ranks (torch.multiprocessing.spawn, DDP over gloo) whose
forward takes --work-ms (slept, so six of them fit on two CPUs); a slower node is the same
script with more --work-ms. No gputop code: the agent comes from `gputop diagnose --`."""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


class Slow(nn.Module):
    """A layer whose forward takes ``ms`` milliseconds: the node's compute speed."""

    def __init__(self, ms):
        super().__init__()
        self.ms = ms
        self.linear = nn.Linear(64, 10)

    def forward(self, x):
        time.sleep(self.ms / 1000)
        return self.linear(x)


def train(rank, world, seconds, port, ms):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    model = nn.parallel.DistributedDataParallel(Slow(ms))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--port", type=int, default=29571)
    p.add_argument("--work-ms", type=float, default=40)
    a = p.parse_args()
    mp.spawn(train, args=(2, a.seconds, a.port, a.work_ms), nprocs=2)
