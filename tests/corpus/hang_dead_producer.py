"""Batches come from a background prefetch thread through a queue.Queue. After --stuck-after
seconds the producer hits a bad record and dies with an exception that only reaches a log
nobody reads; the main thread then waits in queue.get() for good: no steps, no CPU."""

import argparse
import logging
import queue
import threading
import time

import torch
from torch import nn

log = logging.getLogger("train")


def producer(q, stuck_after):
    start = time.monotonic()
    while True:
        if time.monotonic() - start > stuck_after:
            raise ValueError("corrupt record in shard 3")  # the thread ends here, silently
        q.put((torch.randn(512, 512), torch.randint(0, 10, (512,))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = queue.Queue(maxsize=8)
    threading.Thread(target=producer, args=(batches, args.stuck_after), daemon=True).start()
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        x, y = batches.get()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 100 == 0:
            log.info("step %d loss %.3f", step, loss.item())


if __name__ == "__main__":
    main()
