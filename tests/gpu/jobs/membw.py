"""Memory-bandwidth bound: norms and activations over large activations, few FLOPs per byte
(memory-bandwidth)."""

import torch
from _common import setup, train

args, device, cuda = setup(__doc__)
rows, width = (32 * 1024, 8192) if cuda else (256, 512)
dtype = torch.bfloat16 if cuda else torch.float32
norm = torch.nn.LayerNorm(width).to(device, dtype)
x = torch.randn(rows, width, device=device, dtype=dtype, requires_grad=True)


def step() -> None:
    h = x
    for _ in range(4):
        h = torch.nn.functional.gelu(norm(h)) * 1.01 + h
    h.float().mean().backward()
    x.grad = None


train(args, step)
