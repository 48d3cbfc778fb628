"""Trains on labels a preprocessing process sends over a pipe (one line per request). The
preprocessor refreshes a shared tokenizer cache under a file lock every 20 items; a cache
warmer it started at launch detaches (a daemon, outside the job), takes the same lock after
--stuck-after seconds and never releases it. The preprocessor blocks in flock, writes nothing
more, and the trainer's read of the pipe never ends: trainer -> preprocessor -> lock held
outside the job. The trainer's stack shows only a pipe read."""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

LOCK = os.path.join(tempfile.gettempdir(), "corpus-chain.lock")

PREPROCESSOR = r"""
import fcntl, os, sys, time
lock, after, watched = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
if os.fork() == 0:  # the cache warmer: detaches, takes the lock later, keeps it
    os.setsid()
    if os.fork():
        os._exit(0)
    time.sleep(after)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        while True:
            try:
                os.kill(watched, 0)
            except OSError:
                os._exit(0)
            time.sleep(0.5)
else:
    os.wait()
n = 0
while sys.stdin.buffer.readline():  # one label per request: nothing is written ahead
    n += 1
    if n % 20 == 0:
        with open(lock, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            time.sleep(0.002)
            fcntl.flock(f, fcntl.LOCK_UN)
    sys.stdout.write(f"{n % 10}\n")
    sys.stdout.flush()
"""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    prep = subprocess.Popen(
        [sys.executable, "-c", PREPROCESSOR, LOCK, str(args.stuck_after), str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        bufsize=0,
    )
    asks, labels = prep.stdin, prep.stdout
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 512)
    end = time.monotonic() + args.seconds
    try:
        while time.monotonic() < end:
            asks.write(b"next\n")
            y = torch.full((64,), int(labels.readline() or b"0"))
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        prep.kill()


if __name__ == "__main__":
    main()
