"""A healthy bf16 transformer: batches made on the GPU, the tensor cores busy (gpu-compute)."""

import torch
from _common import setup, train

args, device, cuda = setup(__doc__)
width, layers, batch, seq = (1024, 8, 32, 512) if cuda else (64, 2, 8, 32)
dtype = torch.bfloat16 if cuda else torch.float32
layer = torch.nn.TransformerEncoderLayer(
    width, nhead=16 if cuda else 4, dim_feedforward=4 * width, batch_first=True
)
model = torch.nn.TransformerEncoder(layer, layers).to(device, dtype)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(batch, seq, width, device=device, dtype=dtype)


def step() -> None:
    loss = model(x).float().pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


train(args, step)
