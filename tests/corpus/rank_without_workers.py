"""DDP under torchrun, two ranks with the same model and the same data; a per-rank config
(one YAML per rank, as some launch scripts write them) left rank 1 with `num_workers=0`, so
rank 1 builds every batch on its training thread (tokenising and padding in Python, ~12 ms a
batch) while rank 0's one worker builds its batches ahead. Rank 0 waits for rank 1 in every
all-reduce."""

import argparse
import random
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset

CONFIG = {0: {"num_workers": 1}, 1: {"num_workers": 0}}


class Clicks(Dataset):
    """Raw session strings, split and mapped to ids on access."""

    def __init__(self, n=20000, seed=0):
        rng = random.Random(seed)
        self.rows = [" ".join(f"item{rng.randrange(5000)}" for _ in range(120)) for _ in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids = [int(tok[4:]) % 4096 for tok in self.rows[i].split()]
        ids = [(x * 2654435761) % 4096 for x in ids for _ in range(6)][:512]
        return torch.tensor(ids + [0] * (512 - len(ids))), i % 10


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--same-workers", action="store_true",
                   help="the lever applied: rank 1 given rank 0's num_workers")  # fmt: skip
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = CONFIG[0] if args.same_workers else CONFIG[rank]
    loader = DataLoader(Clicks(seed=rank), batch_size=32, shuffle=True, **config)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.EmbeddingBag(4096, 256), nn.Linear(256, 1024), nn.ReLU(),
                      nn.Linear(1024, 10))
    )  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if rank == 0 and step % 200 == 0:
                print(f"step {step} loss {loss.item():.3f}", flush=True)
            if time.monotonic() >= end:
                break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
