"""Launch-bound: a tiny MLP on a batch of 4, the loss read with .item() each step, so the host
waits for each step's few small kernels (host-overhead)."""

import torch
from _common import setup, train

args, device, cuda = setup(__doc__)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
model = model.to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 64, device=device)
y = torch.randn(4, 1, device=device)
losses = []


def step() -> None:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())  # a sync each step
    del losses[:-100]


train(args, step)
