"""DDP over gloo, launched with torchrun: two equal ranks, a model big enough that compute is
the step and the all-reduce is small next to it. Healthy: compute-bound."""

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
args = p.parse_args()
dist.init_process_group("gloo")
torch.set_num_threads(1)
torch.manual_seed(dist.get_rank())
model = nn.parallel.DistributedDataParallel(
    nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
# a batch large enough that the all-reduce of 1M gradients (one bucket: none of it overlaps
# backward) stays a few per cent of the step on a busy 2-CPU machine too (2048: 10%)
x, y = torch.randn(4096, 1024), torch.randint(0, 10, (4096,))
end = time.monotonic() + args.seconds
while time.monotonic() < end:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.destroy_process_group()
