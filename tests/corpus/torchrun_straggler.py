"""DDP under torchrun with two ranks where the data is skewed: rank 1's shard holds longer
sequences, so its forward and backward take about twice as long and rank 0 waits for it in
every gradient all-reduce. One slow rank sets the pace of both.

The batch (64 sequences) makes each step's compute large against the 1-MB gradient all-reduce:
on two CPUs shared with other work, gloo's transfer slows with the CPU it is given, and with
32 sequences it measured longer than the wait for rank 1 (comms 25%, straggler 21%)."""

import argparse
import time

import torch
import torch.distributed as dist
from _clocks import Clocks
from torch import nn

BATCH = 64


class Encoder(nn.Module):
    def __init__(self, vocab=1000, dim=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, 2)

    def forward(self, tokens):
        return self.head(self.mlp(self.embed(tokens)).mean(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--balanced", action="store_true", help="every rank's sequences as long")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    model = nn.parallel.DistributedDataParallel(Encoder())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    seq_len = 256 if rank == 1 and not args.balanced else 128  # rank 1's: the long documents
    clocks = Clocks(steps_only=True)  # the steps' lengths, for the before/after tests
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        tokens = torch.randint(0, 1000, (BATCH, seq_len))
        loss = nn.functional.cross_entropy(model(tokens), torch.randint(0, 2, (BATCH,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        clocks.step()
        step += 1
        if rank == 0 and step % 100 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
