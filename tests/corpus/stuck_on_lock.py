"""Trains normally, then the main thread blocks for good on a lock a background thread took and
never releases (a logging or metrics helper that deadlocked): no more steps, no CPU."""

import argparse
import threading
import time

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
p.add_argument("--stuck-after", type=float, default=8)
args = p.parse_args()
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 512), torch.randint(0, 10, (64,))
metrics_lock = threading.Lock()
start = time.monotonic()


def flusher():
    time.sleep(args.stuck_after)
    metrics_lock.acquire()  # and never lets go


threading.Thread(target=flusher, daemon=True).start()
while time.monotonic() - start < args.seconds:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with metrics_lock:  # record the loss
        last = float(loss)
