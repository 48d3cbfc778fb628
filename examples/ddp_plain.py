"""DistributedDataParallel over gloo with no gputop code: what a training script written
elsewhere looks like. Run it as it is usually run, or under `gputop run`:

    torchrun --nproc-per-node 2 examples/ddp_plain.py --slow-rank 1
    python examples/ddp_plain.py --spawn 2 --slow-rank 1    # torch.multiprocessing.spawn
    python examples/ddp_plain.py --spawn 2 --allreduce      # hand-written all_reduce, no DDP
    python examples/ddp_plain.py --spawn 2 --allreduce --async-op   # ... then Work.wait()

The gradient all-reduce runs inside backward (DDP) or after it (--allreduce); a slow rank
(--slow-rank, CPU work before each forward) makes the other rank wait there.
"""

from __future__ import annotations

import os
import threading
import time

import torch
import torch.distributed as dist
from _common import busy, checkpoint, done, flags, loader, model
from torch import nn


def train(rank: int, world: int, args) -> None:
    if args.spawn:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        dist.init_process_group("gloo", rank=rank, world_size=world)
    else:
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = model(args)
    if not args.allreduce:
        net = nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    started, step = time.monotonic(), 0
    while not done(args, step, started):
        for x, y in loader(args):
            if rank == args.slow_rank:
                busy(args.slow_ms)  # a straggler: slower hardware, a bigger shard
            if rank == args.stall_rank and step == args.stall_after:
                threading.Event().wait()  # never comes back: the other ranks wait in backward
            loss = loss_fn(net(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if args.allreduce:
                works = [dist.all_reduce(p.grad, async_op=args.async_op) for p in net.parameters()]
                for p, work in zip(net.parameters(), works, strict=True):
                    if work is not None:
                        work.wait()
                    p.grad /= world
            opt.step()
            step += 1
            if args.checkpoint_every and step % args.checkpoint_every == 0 and rank == 0:
                checkpoint(net)
            if done(args, step, started):
                break
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(f"done: {step} steps on {world} ranks", flush=True)


def main() -> None:
    p = flags(__doc__)
    p.add_argument("--slow-rank", type=int, default=-1, help="this rank does extra work")
    p.add_argument("--slow-ms", type=float, default=30.0, help="extra work per step (ms)")
    p.add_argument("--stall-rank", type=int, default=-1, help="this rank gets stuck for good")
    p.add_argument("--stall-after", type=int, default=10, help="... at this step")
    p.add_argument("--spawn", type=int, default=0, help="start N ranks with mp.spawn")
    p.add_argument("--port", type=int, default=29533, help="MASTER_PORT with --spawn")
    p.add_argument("--allreduce", action="store_true", help="all_reduce by hand, no DDP")
    p.add_argument("--async-op", action="store_true", help="... async, then Work.wait()")
    args = p.parse_args()
    if args.spawn:
        os.environ["MASTER_PORT"] = str(args.port)
        torch.multiprocessing.spawn(train, args=(args.spawn, args), nprocs=args.spawn)
    else:
        train(0, 0, args)


if __name__ == "__main__":
    main()
