"""Label ids come from a small preprocessing process over a pipe (one record per step). The
trainer starts it with the pipe's write end and forgets to close its own copy. After
--stuck-after seconds the preprocessor dies on a bad input (its error goes to a log nobody
reads); since the trainer still holds a write end, its read never sees end-of-file: the main
thread blocks in os.read for good, no CPU, and the stack shows only the read."""

import argparse
import os
import struct
import subprocess
import sys
import time

import torch
from torch import nn

PREPROCESS = """
import os, struct, sys, time
fd, stuck_after = int(sys.argv[1]), float(sys.argv[2])
start = time.monotonic()
while True:
    if time.monotonic() - start > stuck_after:
        sys.exit(1)  # a corrupt record: the preprocessor dies
    os.write(fd, struct.pack("!256B", *(i % 10 for i in range(256))))
"""


def read_exact(fd, n):
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("the preprocessor closed the pipe")
        data += chunk
    return data


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    r, w = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", PREPROCESS, str(w), str(args.stuck_after)],
        pass_fds=(w,),
        stderr=subprocess.DEVNULL,
    )
    # the bug: `os.close(w)` belongs here; without it the read below never sees EOF
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 512)
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        y = torch.tensor(struct.unpack("!256B", read_exact(r, 256)), dtype=torch.long)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    child.kill()


if __name__ == "__main__":
    main()
