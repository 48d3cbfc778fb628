"""A training loop with an evaluation every --eval-every steps. From the evaluation at step
--leak-from on, the evaluation keeps its outputs in a list (a metric helper that forgot
`.detach().item()`), and the loop's running metric is averaged over that list at every step:
the job's memory grows with each evaluation, and its step time moves up after the first leaky
one and stays there: a regression that starts at an eval. --gpu-ms M: each step also waits M ms,
as for the GPU's share of a real step.

    python eval_leak.py --eval-every 200 --leak-from 400 --seconds 60
"""

import argparse
import time

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
p.add_argument("--eval-every", type=int, default=200)
p.add_argument("--leak-from", type=int, default=400)
p.add_argument("--kept-per-eval", type=int, default=12)
p.add_argument("--gpu-ms", type=float, default=0.0)
args = p.parse_args()
torch.set_num_threads(1)

model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(1024, 512), torch.randint(0, 10, (1024,))
kept: list[torch.Tensor] = []  # the helper's list of eval outputs, never cleared


def evaluate(step: int) -> None:
    with torch.no_grad():
        for _ in range(args.kept_per_eval):
            out = model[0](torch.randn(1024, 512))  # 4 MiB a batch
            if step >= args.leak_from:
                kept.append(out)  # kept for a metric at the end of the epoch


end = time.monotonic() + args.seconds
step = 0
while time.monotonic() < end:
    if step and step % args.eval_every == 0:
        evaluate(step)
        if step == args.leak_from:
            print(f"the eval at step {step} starts keeping its outputs", flush=True)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if args.gpu_ms:
        time.sleep(args.gpu_ms / 1000)
    if kept:
        running = torch.stack(kept).mean()  # the running metric, over everything kept
        del running
    step += 1
