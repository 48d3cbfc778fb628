"""DDP under torchrun, two equal ranks, each pinned to a CPU of its own (the usual
one-rank-per-core placement); a log shipper started beside rank 1 runs outside the job (it
detaches, as a daemon does) on rank 1's CPU and keeps it busy, so rank 1's steps take about
twice as long and rank 0 waits for it in every all-reduce. Nothing about rank 1's data or
model differs."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn


def ship_logs(cpu, watched, seconds):
    """A daemon on ``cpu`` that burns it until ``watched`` exits (or ``seconds`` pass)."""
    child = os.fork()
    if child:
        os.waitpid(child, 0)  # it exits at once, leaving the daemon to init
        return
    os.setsid()
    if os.fork():  # detached: its parent exits, so it belongs to no one's tree
        os._exit(0)
    os.sched_setaffinity(0, {cpu})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(watched, 0)
        except OSError:
            break
        for _ in range(200_000):  # compressing and sending log lines
            pass
    os._exit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    cpus = sorted(os.sched_getaffinity(0))
    mine = cpus[rank % len(cpus)]
    os.sched_setaffinity(0, {mine})
    torch.set_num_threads(1)
    if rank == 1:
        ship_logs(mine, os.getpid(), args.seconds + 30)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(
            nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 512), nn.GELU(), nn.Linear(512, 10)
        )
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if rank == 0 and step % 200 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
