"""Two (or more) data-parallel ranks over gloo, one of them slow on purpose.

    torchrun --nproc-per-node 2 examples/ddp_train.py --slow-rank 1
    torchrun --nproc-per-node 2 examples/ddp_train.py --stall-rank 1   # a hung job
    torchrun --nproc-per-node 2 examples/ddp_train.py --skew-rank 1    # data skew

Gradients are averaged with an explicit all_reduce inside the GRAD_SYNC phase, so each rank's
time waiting for the others is visible: the slow rank does more work and waits least; the
fast rank's grad_sync grows by the difference.
"""

from __future__ import annotations

import threading
import time

import torch
import torch.distributed as dist
from _common import busy, done, flags, loader, model, setup
from torch import nn

import gputop.agent as gt


def stuck_reader() -> None:
    """A rank that never comes back: a read from a dead mount, a deadlock in user code."""
    threading.Event().wait()


def main() -> None:
    p = flags(__doc__)
    p.add_argument("--slow-rank", type=int, default=-1, help="this rank does extra work")
    p.add_argument("--slow-ms", type=float, default=30.0, help="extra work per step (ms)")
    p.add_argument("--skew-rank", type=int, default=-1, help="this rank gets bigger batches")
    p.add_argument("--skew", type=int, default=3, help="... this many times the --batch")
    p.add_argument("--stall-rank", type=int, default=-1, help="this rank gets stuck for good")
    p.add_argument("--stall-after", type=int, default=20, help="... at this step")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    if rank == args.skew_rank:  # data skew: an uneven shard, longer sequences on one rank
        args.batch *= args.skew
    gt.init(auto_step=False)  # this loop calls gt.step() itself
    device = setup(args)
    torch.manual_seed(0)
    net = model(args).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    started, step = time.monotonic(), 0
    while not done(args, step, started):
        for x, y in loader(args):
            with gt.H2D:
                x, y = x.to(device), y.to(device)
            if rank == args.stall_rank and step == args.stall_after:
                stuck_reader()  # the other ranks now wait in all_reduce: the job hangs
            with gt.FORWARD:
                if rank == args.slow_rank:
                    busy(args.slow_ms)  # a straggler: slower hardware, bigger shard, noisy host
                loss = loss_fn(net(x), y)
            with gt.BACKWARD:
                opt.zero_grad(set_to_none=True)
                loss.backward()
            with gt.GRAD_SYNC:
                for param in net.parameters():
                    dist.all_reduce(param.grad)
                    param.grad /= world
            opt.step()
            step += 1
            gt.step(samples=len(x))
            if done(args, step, started):
                break
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(f"done: {step} steps on {world} ranks", flush=True)


if __name__ == "__main__":
    main()
