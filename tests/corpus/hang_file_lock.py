"""Trains, and refreshes a shared dataset cache under a file lock every 20 steps. A cache
warmer it started at launch detaches (a daemon, outside the job), takes the same lock for its
own refresh after a few seconds and never releases it (it waits on a download that never
ends): after --stuck-after seconds the next refresh blocks in flock for good, main thread
parked, no CPU. The stack shows only the flock; the holder is in no process of the job."""

import argparse
import fcntl
import os
import tempfile
import time

import torch
from torch import nn

LOCK = os.path.join(tempfile.gettempdir(), "corpus-cache.lock")


def cache_warmer(after, watched):
    """A detached daemon: takes the lock after ``after`` seconds and keeps it while
    ``watched`` lives."""
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    time.sleep(after)
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        while True:  # the download it waits on never finishes
            try:
                os.kill(watched, 0)
            except OSError:
                os._exit(0)
            time.sleep(0.5)


def refresh_cache():
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            time.sleep(0.002)  # read the index the warmer wrote
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    cache_warmer(args.stuck_after, os.getpid())
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 20 == 0:
            refresh_cache()


if __name__ == "__main__":
    main()
