"""A training loop with a validation pass every 25 steps (no_grad, model.eval()) over a held-out
set about as large as 25 training batches: the evaluation is a large share of wall time.

Batches of 512 (steps of ~30 ms here): with 64 a step took ~5 ms, the budget's 512-step window
held under 3 s, and the twin with the lever applied (`--eval-every 50`) measured a 0.3-0.9 ms
saving on a 0.8-ms estimate, inside the noise of such short steps."""

import argparse
import time

import torch
from _clocks import Clocks
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
p.add_argument("--eval-every", type=int, default=25)
args = p.parse_args()
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
train_x, train_y = torch.randn(512, 512), torch.randint(0, 10, (512,))
val = [(torch.randn(2048, 512), torch.randint(0, 10, (2048,))) for _ in range(12)]
clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
end, step = time.monotonic() + args.seconds, 0
while time.monotonic() < end:
    model.train()
    with clocks.part("compute"):
        loss = nn.functional.cross_entropy(model(train_x), train_y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    step += 1
    if step % args.eval_every == 0:
        with clocks.part("eval"):
            model.eval()
            with torch.no_grad():
                correct = sum(int((model(x).argmax(1) == y).sum()) for x, y in val)
    clocks.step()
