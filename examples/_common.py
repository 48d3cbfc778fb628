"""Shared parts of the example trainers: flags, a synthetic dataset, a small MLP.

Each flag makes one bottleneck on purpose (see examples/README.md). Runs on the CPU in
seconds and unchanged on a GPU.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def flags(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=200, help="stop after this many steps")
    p.add_argument("--seconds", type=float, default=0, help="or after this long (0: no limit)")
    p.add_argument("--batch", type=int, default=64, help="samples per step")
    p.add_argument("--dim", type=int, default=256, help="input features")
    p.add_argument("--hidden", type=int, default=512, help="hidden units")
    p.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    p.add_argument("--pin-memory", action="store_true", help="DataLoader pin_memory")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: default)")
    p.add_argument(
        "--slow-transform-ms",
        type=float,
        default=0,
        help="CPU work per batch in the loader (busy, like a heavy augmentation)",
    )
    p.add_argument(
        "--read-latency-ms",
        type=float,
        default=0,
        help="wait per batch in the loader without using the CPU (remote storage, a slow API)",
    )
    p.add_argument("--checkpoint-every", type=int, default=0, help="torch.save every N steps")
    p.add_argument("--sync-every", type=int, default=0, help="loss.item() every N steps")
    p.add_argument("--report", action="store_true", help="print the mean step time at the end")
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd", help="optimizer")
    return p


def report(args: argparse.Namespace, steps: int, started: float) -> None:
    if args.report and steps:
        print(f"mean step {(time.monotonic() - started) / steps * 1000:.3f} ms over {steps} steps")


def busy(ms: float) -> None:
    """Burn CPU for ``ms`` milliseconds (a transform that computes, not one that sleeps)."""
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


class Synthetic(Dataset):
    def __init__(self, n: int, dim: int, classes: int = 10) -> None:
        self.n, self.dim, self.classes = n, dim, classes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), i % self.classes


class SlowCollate:
    def __init__(self, ms: float, latency_ms: float = 0) -> None:
        self.ms, self.latency_ms = ms, latency_ms

    def __call__(self, items):
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)  # waiting on a remote read: no CPU, no disk
        busy(self.ms)
        xs, ys = zip(*items, strict=True)
        return torch.stack(xs), torch.tensor(ys)


def loader(args: argparse.Namespace, dataset: Dataset | None = None, **kw) -> DataLoader:
    dataset = dataset or Synthetic(args.batch * max(args.steps, 1) + args.batch, args.dim)
    return DataLoader(
        dataset,
        batch_size=args.batch,
        num_workers=args.workers,
        pin_memory=args.pin_memory,
        collate_fn=SlowCollate(args.slow_transform_ms, args.read_latency_ms),
        persistent_workers=args.workers > 0,
        **kw,
    )


def model(args: argparse.Namespace) -> nn.Module:
    return nn.Sequential(nn.Linear(args.dim, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))


def optimizer(args: argparse.Namespace, net: nn.Module) -> torch.optim.Optimizer:
    if args.optimizer == "adam":  # per-tensor loops: a visible optimizer phase
        return torch.optim.Adam(net.parameters(), lr=1e-3, foreach=False)
    return torch.optim.SGD(net.parameters(), lr=0.01)


def setup(args: argparse.Namespace) -> torch.device:
    if args.threads:
        torch.set_num_threads(args.threads)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def checkpoint(net: nn.Module) -> None:
    fd, path = tempfile.mkstemp(suffix=".pt")
    os.close(fd)
    try:
        torch.save(net.state_dict(), path)
    finally:
        os.unlink(path)


def done(args: argparse.Namespace, step: int, started: float) -> bool:
    if step >= args.steps:
        return True
    return bool(args.seconds) and time.monotonic() - started >= args.seconds
