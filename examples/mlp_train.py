"""The same loop as mlp_plain.py, instrumented with gputop.agent: every phase of the step is
named, so the monitor shows batch wait, H2D, forward, backward, optimizer and side work."""

from __future__ import annotations

import time

from _common import checkpoint, done, flags, loader, model, optimizer, py_heap, report, setup
from torch import nn

import gputop.agent as gt


def main() -> None:
    args = flags(__doc__).parse_args()
    gt.init(auto_step=False)  # this loop calls gt.step() itself
    device = setup(args)
    net = model(args).to(device)
    opt = optimizer(args, net)
    loss_fn = nn.CrossEntropyLoss()
    heap = py_heap(args)  # --gc-heap: long-lived Python records, 5% replaced per step
    started, step = time.monotonic(), 0
    while not done(args, step, started):
        for x, y in loader(args):  # data wait: timed by the agent's DataLoader hook
            if heap:
                heap.churn()  # not marked: the collections it causes land anywhere
            with gt.H2D:
                x = x.to(device, non_blocking=args.pin_memory)
                y = y.to(device, non_blocking=args.pin_memory)
            with gt.FORWARD:
                loss = loss_fn(net(x), y)
            with gt.BACKWARD:
                opt.zero_grad(set_to_none=True)
                loss.backward()
            opt.step()  # the optimizer phase: timed by torch's global optimizer hooks
            step += 1
            if args.sync_every and step % args.sync_every == 0:
                with gt.LOG:
                    print(f"step {step} loss {loss.item():.4f}", flush=True)
            if args.checkpoint_every and step % args.checkpoint_every == 0:
                with gt.CHECKPOINT:
                    checkpoint(net)
            gt.step(samples=len(x))
            if done(args, step, started):
                break
    report(args, step, started)


if __name__ == "__main__":
    main()
