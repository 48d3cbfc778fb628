"""DDP under torchrun, two ranks with the same data and model; rank 1 also keeps a per-sample
statistics cache of small Python records (its own curriculum bookkeeping) and replaces part
of it every step, so CPython runs full garbage collections on rank 1 only, each traversing
the whole cache, and rank 0 waits for it in the all-reduce."""

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn


class SampleStats:
    """Records per sample; 5% replaced each step (they survive into the oldest generation)."""

    def __init__(self, n):
        self.chunk = n // 20
        self.made = 0
        self.chunks = [self.records() for _ in range(20)]
        self.oldest = 0

    def records(self):
        first, self.made = self.made, self.made + self.chunk
        ids = range(first, self.made)
        return [{"id": i, "loss": [0.0, 0.0], "seen": {"epoch": 0}} for i in ids]

    def update(self):
        self.chunks[self.oldest] = self.records()
        self.oldest = (self.oldest + 1) % len(self.chunks)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    stats = SampleStats(400_000) if rank == 1 else None
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if stats is not None:
            stats.update()
        step += 1
        if rank == 0 and step % 200 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
