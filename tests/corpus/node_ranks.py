"""One node of a multi-node job: two ranks (torch.multiprocessing.spawn, DDP over gloo) of a
job of --nodes such nodes, each started on its own as torchrun starts one per node (global rank
= node * 2 + local rank, one rendezvous at --port). A rank's forward takes --work-ms (slept, so
many ranks fit on two CPUs) and its batches come from a torch DataLoader whose read takes
--read-ms; with --stall-after N the read blocks for good after N batches (a dead mount). Every
rank all-reduces its gradients with every other, so a slow node makes the whole job wait.
No gputop code: the agent comes from `gputop diagnose --`."""

import argparse
import os
import threading
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

PER_NODE = 2
STOP_EVERY = 20
"""Steps between the ranks' agreement to stop: every rank stops at the same step, so none is
left alone in an all-reduce."""


class Slow(nn.Module):
    """A layer whose forward takes ``ms`` milliseconds: the node's compute speed."""

    def __init__(self, ms):
        super().__init__()
        self.ms = ms
        self.linear = nn.Linear(64, 10)

    def forward(self, x):
        time.sleep(self.ms / 1000)
        return self.linear(x)


class Reads(IterableDataset):
    """Batches whose read takes ``ms`` milliseconds; after ``stall_after`` of them (0: never)
    the read never returns."""

    def __init__(self, ms, stall_after):
        self.ms, self.stall_after = ms, stall_after

    def __iter__(self):
        n = 0
        while True:
            n += 1
            if self.stall_after and n > self.stall_after:
                threading.Event().wait()
            if self.ms:
                time.sleep(self.ms / 1000)
            yield torch.randn(8, 64), torch.randint(0, 10, (8,))


def _all_done(end):
    """True on every rank once any rank's time is up (a collective: all ranks call it)."""
    flag = torch.tensor([float(time.monotonic() >= end)])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def train(local, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    world = args.nodes * PER_NODE
    dist.init_process_group("gloo", rank=args.node * PER_NODE + local, world_size=world)
    torch.set_num_threads(1)
    model = nn.parallel.DistributedDataParallel(Slow(args.work_ms))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = DataLoader(Reads(args.read_ms, args.stall_after), batch_size=None)
    end = time.monotonic() + args.seconds
    for step, (x, y) in enumerate(batches):
        if step % STOP_EVERY == 0 and _all_done(end):
            break
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--port", type=int, default=29571, help="the job's rendezvous (every node)")
    p.add_argument("--node", type=int, default=0, help="this node's index in the job")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--work-ms", type=float, default=40)
    p.add_argument("--read-ms", type=float, default=0)
    p.add_argument("--stall-after", type=int, default=0)
    mp.spawn(train, args=(p.parse_args(),), nprocs=PER_NODE)
