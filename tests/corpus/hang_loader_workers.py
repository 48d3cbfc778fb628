"""A sharded dataset read by a DataLoader with two workers. Items of the second shard wait until
a downloader signals the shard is on disk; the downloader died, so after --stuck-after seconds
every worker blocks in Event.wait() and the main process waits for a batch forever."""

import argparse
import multiprocessing
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class ShardedDataset(Dataset):
    def __init__(self, shard_ready, stuck_after):
        self.shard_ready = shard_ready
        self.second_shard_at = time.time() + stuck_after

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        if time.time() > self.second_shard_at:
            self.shard_ready.wait()  # set by the downloader, which crashed
        return torch.randn(512), i % 10


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    shard_ready = multiprocessing.Event()
    data = ShardedDataset(shard_ready, args.stuck_after)
    loader = DataLoader(data, batch_size=512, num_workers=2, persistent_workers=True)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    end = time.monotonic() + args.seconds
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
        if time.monotonic() >= end:
            break


if __name__ == "__main__":
    main()
