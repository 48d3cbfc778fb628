"""An accelerate script launched the way its docs say, `accelerate launch --multi_gpu
--num_processes 2 accelerate_ddp.py`, with Accelerator(cpu=True): two gloo ranks, DDP under
accelerate's prepare(), small inputs through a model whose compute per step (a batch of 1024)
is far larger than its gradient's all-reduce.
Healthy: compute-bound."""

import argparse
import time

import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
args = p.parse_args()
torch.set_num_threads(1)
accelerator = Accelerator(cpu=True)
model = nn.Sequential(nn.Linear(256, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                      nn.Linear(2048, 10))  # fmt: skip
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(16384, 256), torch.randint(0, 10, (16384,)))
loader = DataLoader(data, batch_size=1024, shuffle=True)
model, opt, loader = accelerator.prepare(model, opt, loader)
end = time.monotonic() + args.seconds
while time.monotonic() < end:
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        accelerator.backward(loss)
        opt.step()
        if time.monotonic() >= end:
            break
