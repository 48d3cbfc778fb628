"""Trains while a helper process scores each batch: the trainer writes a request line on one
pipe and reads the score from another. After --stuck-after seconds the helper "upgrades its
protocol" and first waits for a handshake line the trainer never sends, while the trainer
waits for the score: each process reads a pipe only the other writes. A deadlock between two
processes, every link a pipe."""

import argparse
import os
import subprocess
import sys
import time

import torch
from torch import nn

HELPER = r"""
import os, sys, time
requests, replies, after = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
start = time.monotonic()
inbox = os.fdopen(requests, "rb", buffering=0)
outbox = os.fdopen(replies, "wb", buffering=0)
while True:
    line = inbox.readline()
    if not line:
        break
    if time.monotonic() - start > after:
        inbox.readline()  # the handshake the trainer never sends
    outbox.write(b"0.5\n")
"""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    helper = subprocess.Popen(
        [sys.executable, "-c", HELPER, str(req_r), str(rep_w), str(args.stuck_after)],
        pass_fds=(req_r, rep_w),
    )
    os.close(req_r)  # the trainer keeps only its own ends: a dead helper would end the read
    os.close(rep_w)
    requests = os.fdopen(req_w, "wb", buffering=0)
    scores = os.fdopen(rep_r, "rb", buffering=0)
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
    end = time.monotonic() + args.seconds
    try:
        while time.monotonic() < end:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            requests.write(b"score\n")
            float(scores.readline() or b"0")
    finally:
        helper.kill()


if __name__ == "__main__":
    main()
