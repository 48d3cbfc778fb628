"""Per-step metrics written synchronously: after every step the script reads each parameter's
weight and gradient norms and a 64-bin weight histogram (.item() / .tolist() per tensor),
formats one big JSON record and appends it to a metrics file with flush and fsync. The logging,
not the model, is most of the step."""

import argparse
import json
import os
import tempfile
import time

import torch
from _clocks import Clocks
from torch import nn


def metrics(model, step, loss):
    record = {"step": step, "loss": loss.item(), "time": time.time()}
    for name, p in model.named_parameters():
        record[name] = {
            "norm": p.norm().item(),
            "grad_norm": p.grad.norm().item(),
            "hist": torch.histc(p.detach(), bins=64).tolist(),
        }
    return record


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    torch.set_num_threads(1)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(128, 128), nn.LayerNorm(128), nn.ReLU())
                            for _ in range(16)], nn.Linear(128, 10))  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
    path = os.path.join(tempfile.gettempdir(), "corpus-metrics.jsonl")
    end, step = time.monotonic() + args.seconds, 0
    with open(path, "w") as log:
        clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
        while time.monotonic() < end:
            with clocks.part("compute"):
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            step += 1
            with clocks.part("log"):  # the job's view: all of it is its metrics logging
                log.write(json.dumps(metrics(model, step, loss), indent=1) + "\n")
                log.flush()
                os.fsync(log.fileno())
            clocks.step()


if __name__ == "__main__":
    main()
