"""Short epochs over a sharded dataset whose DataLoader workers open their shard index when
they start (a worker_init_fn that loads a 400k-entry vocabulary and offsets table, as a
tokenizer or an LMDB handle would), with persistent_workers left at its default (False).
Each epoch starts two new workers that load it again before the first batch; within an epoch
the workers keep up with the small model. The data wait is one long pause per epoch."""

import argparse
import random
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Shards(Dataset):
    def __init__(self, n=1536):
        self.n = n
        self.index = None  # opened per worker: a handle is not shared across processes

    def open(self):
        rng = random.Random(0)
        self.index = {f"tok{i}": (rng.randrange(1 << 30), i % 4096) for i in range(400_000)}

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        _, tok = self.index[f"tok{(i * 7919) % 400_000}"]
        return torch.full((64,), float(tok % 97)), i % 10


def opened(_):
    get_worker_info().dataset.open()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--persistent", action="store_true",
                   help="the lever applied: persistent_workers=True")  # fmt: skip
    args = p.parse_args()
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Shards(), batch_size=32, shuffle=True, num_workers=2,
                        worker_init_fn=opened, persistent_workers=args.persistent)  # fmt: skip
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if time.monotonic() >= end:
                break


if __name__ == "__main__":
    main()
