"""A training loop whose data gets slower midway: from step --from-step on, each batch comes
from a shard on a slower store (a wait of --extra-ms per batch in the DataLoader, the training
thread asleep), as when a dataset's later shards live elsewhere or a neighbour starts reading
the same disk. The step time moves to a new level and stays there: a shift inside the run.

    python slower_midway.py --from-step 300 --extra-ms 15 --seconds 30
"""

import argparse
import time

import torch
from _clocks import Clocks
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
p.add_argument("--from-step", type=int, default=300)
p.add_argument("--extra-ms", type=float, default=15.0)
args = p.parse_args()
torch.set_num_threads(1)


class Shards(IterableDataset):
    """Batches from shards; those from --from-step on are on the slower store."""

    def __iter__(self):
        for n in range(10**9):
            if n >= args.from_step:
                time.sleep(args.extra_ms / 1000)  # the slower store answers
            yield torch.randn(256, 512), torch.randint(0, 10, (256,))


model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
clocks = Clocks()  # the script's own timers (_clocks.py)
end = time.monotonic() + args.seconds
for step, (x, y) in enumerate(clocks.batches(DataLoader(Shards(), batch_size=None))):
    if step == args.from_step:
        print(f"slower from step {step}", flush=True)
    with clocks.part("compute"):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if time.monotonic() >= end:
        break
