"""Healthy training, then at --checkpoint-at seconds one big checkpoint: the model, the
optimizer and the per-sample statistics a curriculum keeps (one small tensor per sample, 400k of
them), written with torch.save. Pickling that many tensors takes about 15 s of real CPU work;
then training goes on. Slow once, never stuck."""

import argparse
import logging
import os
import tempfile
import time

import torch
from torch import nn

log = logging.getLogger("train")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--checkpoint-at", type=float, default=10)
    p.add_argument("--samples", type=int, default=400_000)
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "corpus-long-ckpt"))
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sample_stats = [torch.zeros(4) for _ in range(args.samples)]  # loss, seen, last step, weight
    x, y = torch.randn(512, 512), torch.randint(0, 10, (512,))
    os.makedirs(args.out, exist_ok=True)
    start, saved, step = time.monotonic(), False, 0
    while time.monotonic() - start < args.seconds:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if not saved and time.monotonic() - start > args.checkpoint_at:
            t = time.monotonic()
            state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step}
            state["sample_stats"] = sample_stats
            torch.save(state, os.path.join(args.out, "last.pt"))
            log.info("checkpoint at step %d took %.1f s", step, time.monotonic() - t)
            saved = True


if __name__ == "__main__":
    main()
