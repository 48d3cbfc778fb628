"""DDP under torchrun, two ranks each pinned to a CPU of its own, where two things differ about
rank 1 at once: its shard gives it --rows-x times the rows per batch, and a log shipper outside
the job shares its CPU, busy --ship-duty of the time. Which of the two makes rank 1 the
straggler depends on the flags (the bench runs the pair both ways round): more rows stretch its
compute by their ratio, the shipper by the CPU time it takes."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn


def ship_logs(cpu, watched, seconds, duty):
    """A detached daemon on ``cpu``, busy ``duty`` of each 20 ms, until ``watched`` exits."""
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    os.sched_setaffinity(0, {cpu})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(watched, 0)
        except OSError:
            break
        busy_until = time.monotonic() + 0.020 * duty
        while time.monotonic() < busy_until:  # compressing log lines
            pass
        if duty < 1:
            time.sleep(0.020 * (1 - duty))
    os._exit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--rows-x", type=float, default=1.0, help="rank 1's rows per batch, times")
    p.add_argument("--ship-duty", type=float, default=0.0, help="the shipper's busy share")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    cpus = sorted(os.sched_getaffinity(0))
    mine = cpus[rank % len(cpus)]
    os.sched_setaffinity(0, {mine})
    torch.set_num_threads(1)
    if rank == 1 and args.ship_duty > 0:
        ship_logs(mine, os.getpid(), args.seconds + 30, args.ship_duty)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(
            nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 512), nn.GELU(), nn.Linear(512, 10)
        )
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rows = round(64 * args.rows_x) if rank == 1 else 64  # its shard's batches are bigger
    x, y = torch.randn(rows, 512), torch.randint(0, 10, (rows,))
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
