"""A plain training loop with no gputop code: run it under `gputop run -- python
examples/mlp_plain.py ...` and the agent still sees data wait (the DataLoader) and the
optimizer phase and step boundary (torch's global optimizer hooks)."""

from __future__ import annotations

import time

from _common import checkpoint, done, flags, loader, model, optimizer, py_heap, report, setup
from torch import nn


def main() -> None:
    args = flags(__doc__).parse_args()
    device = setup(args)
    net = model(args).to(device)
    opt = optimizer(args, net)
    loss_fn = nn.CrossEntropyLoss()
    heap = py_heap(args)  # --gc-heap: long-lived Python records, 5% replaced per step
    started, step = time.monotonic(), 0
    while not done(args, step, started):
        for x, y in loader(args):
            if heap:
                heap.churn()
            x = x.to(device, non_blocking=args.pin_memory)
            y = y.to(device, non_blocking=args.pin_memory)
            loss = loss_fn(net(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if args.sync_every and step % args.sync_every == 0:
                print(f"step {step} loss {loss.item():.4f}", flush=True)
            if args.checkpoint_every and step % args.checkpoint_every == 0:
                checkpoint(net)
            if done(args, step, started):
                break
    report(args, step, started)


if __name__ == "__main__":
    main()
