"""Training steps of about 30 ms, and every 150 steps a full evaluation over a large validation
set with four test-time augmentations (no_grad, model.eval()) that takes 10 s or more of real
compute. Long silences in the step
stream, but the process is working the whole time: never a hang."""

import argparse
import time

import torch
from _clocks import Clocks
from torch import nn


def evaluate(model, val_x, val_y, tta=4):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(val_x), 256):
            x = val_x[i : i + 256]
            logits = sum(model(x + 0.05 * torch.randn_like(x)) for _ in range(tta))
            correct += int((logits.argmax(1) == val_y[i : i + 256]).sum())
    model.train()
    return correct / len(val_x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--eval-every", type=int, default=150)
    p.add_argument("--val-size", type=int, default=120_000)
    args = p.parse_args()
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 512), torch.randint(0, 10, (512,))
    val_x, val_y = torch.randn(args.val_size, 512), torch.randint(0, 10, (args.val_size,))
    clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        with clocks.part("compute"):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        step += 1
        if step % args.eval_every == 0:
            t = time.monotonic()
            with clocks.part("eval"):
                acc = evaluate(model, val_x, val_y)
            with clocks.part("log"):
                print(f"step {step} val acc {acc:.3f} ({time.monotonic() - t:.1f} s)", flush=True)
        clocks.step()


if __name__ == "__main__":
    main()
