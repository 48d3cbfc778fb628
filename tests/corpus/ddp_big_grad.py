"""DDP under torchrun with a large vocabulary embedding (500k x 128, a dense gradient) and a
tiny head, on a batch of 8 short sequences: the forward and backward are a few milliseconds, the
gradient all-reduce moves 256 MB per step over gloo. Communication is the step."""

import argparse
import time

import torch
import torch.distributed as dist
from _clocks import Clocks
from torch import nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--vocab", type=int, default=500_000)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's bucket size")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Embedding(args.vocab, 128), nn.Flatten(), nn.Linear(128 * 16, 2)),
        bucket_cap_mb=args.bucket_cap_mb,
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    clocks = Clocks(steps_only=True)  # the steps' lengths, for the before/after tests
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        tokens = torch.randint(0, args.vocab, (8, 16))
        loss = nn.functional.cross_entropy(model(tokens), torch.randint(0, 2, (8,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        clocks.step()
        step += 1
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
