"""An ABBA deadlock in user code. The training thread holds model_lock for the step and takes
stats_lock to record the loss; a metrics thread that, after --stuck-after seconds, starts
rotating its file takes stats_lock and then model_lock (to read the weights' norms). Each ends
up holding the lock the other waits for: no steps, no CPU."""

import argparse
import threading
import time

import torch
from torch import nn

model_lock = threading.Lock()
stats_lock = threading.Lock()
history = []


def metrics_thread(model, stuck_after):
    start = time.monotonic()
    while True:
        time.sleep(0.5)
        with stats_lock:
            if time.monotonic() - start > stuck_after:  # log rotation: write out, then read norms
                time.sleep(0.1)
                with model_lock:
                    history.append(sum(p.norm().item() for p in model.parameters()))
            history.clear()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 512), torch.randint(0, 10, (512,))
    threading.Thread(target=metrics_thread, args=(model, args.stuck_after), daemon=True).start()
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        with model_lock:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with stats_lock:
                history.append(loss.item())


if __name__ == "__main__":
    main()
