"""Copied settings from a big node: torch.set_num_threads(16) in the trainer and in each of the
two DataLoader workers (through worker_init_fn), on a two-core machine. Forty-odd compute
threads take turns on two cores; the matmuls and the workers' normalisation thrash each other."""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

THREADS = 16


class Features(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        x = torch.randn(64, 512)
        x = (x - x.mean(0)) / (x.std(0) + 1e-5)  # per-item normalisation, a few threads' worth
        return (x @ x.T).mean(0)[:512].repeat(8)[:512], i % 10


def worker_init(_):
    torch.set_num_threads(THREADS)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    torch.set_num_threads(THREADS)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                          nn.Linear(2048, 10))  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Features(), batch_size=128, num_workers=2, worker_init_fn=worker_init,
                        persistent_workers=True)  # fmt: skip
    end = time.monotonic() + args.seconds
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if time.monotonic() >= end:
            break


if __name__ == "__main__":
    main()
