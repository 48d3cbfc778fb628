"""Shared parts of the example trainers: flags, a synthetic dataset, a small MLP.

Each flag makes one bottleneck on purpose (see examples/README.md). Runs on the CPU in
seconds and unchanged on a GPU.
"""

from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import threading
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

KNOBS: tuple[tuple[str, type, object, str], ...] = (
    ("--slow-transform-ms", float, 0,
     "CPU work per batch in the loader (busy, like a heavy augmentation)"),
    ("--read-latency-ms", float, 0,
     "wait per batch in the loader without using the CPU (remote storage, a slow API)"),
    ("--data-file", str, "",
     "read every sample from this file, uncached (O_DIRECT): a dataset bigger than RAM on local "
     "disk; written with --data-mb of random bytes if missing"),
    ("--data-mb", int, 256, "size of a new --data-file"),
    ("--sample-kb", int, 256, "bytes read per sample (KiB)"),
    ("--dataset-mb", int, 0,
     "hold the dataset in memory as Python objects (MiB): each DataLoader worker that reads it "
     "ends up with its own copy (reference counts write to every page)"),
    ("--loader-stall-after", int, 0,
     "the loader blocks for good after this many batches in each process: a read from a dead "
     "mount (a hung job when the workers do it)"),
    ("--checkpoint-every", int, 0, "torch.save every N steps"),
    ("--sync-every", int, 0, "loss.item() every N steps"),
    ("--gc-heap", int, 0,
     "keep this many thousand small Python records alive and replace 5%% of them every step: a "
     "full garbage collection every few steps, traversing them all"),
)  # fmt: skip
"""The bottleneck knobs: each makes one on purpose (examples/README.md)."""


def flags(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=200, help="stop after this many steps")
    p.add_argument("--seconds", type=float, default=0, help="or after this long (0: no limit)")
    p.add_argument("--batch", type=int, default=64, help="samples per step")
    p.add_argument("--dim", type=int, default=256, help="input features")
    p.add_argument("--hidden", type=int, default=512, help="hidden units")
    p.add_argument("--layers", type=int, default=1, help="hidden layers (each more tensors)")
    p.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    p.add_argument("--pin-memory", action="store_true", help="DataLoader pin_memory")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: default)")
    for flag, kind, default, text in KNOBS:
        p.add_argument(flag, type=kind, default=default, help=text)
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
    def __init__(self, n: int, dim: int, classes: int = 10, in_memory_mb: int = 0) -> None:
        self.n, self.dim, self.classes = n, dim, classes
        # rows of Python floats, ~32 bytes each (object + list slot), like a parsed annotation file
        count = in_memory_mb * 2**20 // (32 * dim)
        self.rows = [[float(r * dim + j) for j in range(dim)] for r in range(count)]

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if self.rows:  # reading the objects touches their reference counts: copy-on-write
            row = self.rows[i % len(self.rows)]
            return torch.tensor([v / 1e9 for v in row]), i % self.classes
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), i % self.classes


class DiskSamples(Dataset):
    """Each sample read from a file on disk past the page cache, as from a dataset bigger than
    RAM: the reader sleeps in the kernel (D state) while the disk works, using little CPU."""

    ALIGN = 4096  # O_DIRECT needs block-aligned offsets, sizes and buffers

    def __init__(self, path: str, n: int, dim: int, sample_kb: int, create_mb: int) -> None:
        self.path, self.n, self.dim = path, n, dim
        self.size = max(self.ALIGN, sample_kb * 1024 // self.ALIGN * self.ALIGN)
        if not os.path.exists(path):
            with open(path, "wb") as f:
                for _ in range(max(1, create_mb)):
                    f.write(os.urandom(1 << 20))
        self.slots = max(1, os.path.getsize(path) // self.size)
        self._fd: int | None = None
        self._pid = 0
        self._buf: mmap.mmap | None = None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))  # fail early, in the parent
        try:
            os.preadv(fd, [mmap.mmap(-1, self.size)], 0)
        except OSError as e:
            raise SystemExit(f"--data-file {path}: no uncached reads here ({e})") from e
        finally:
            os.close(fd)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if self._pid != os.getpid():  # one descriptor and buffer per process (workers fork)
            self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
            self._buf, self._pid = mmap.mmap(-1, self.size), os.getpid()
        slot = (i * 7919) % self.slots  # scattered, like shuffled samples
        os.preadv(self._fd, [self._buf], slot * self.size)  # type: ignore[arg-type]
        x = torch.frombuffer(bytearray(self._buf[: self.dim]), dtype=torch.uint8)
        return x.float() / 255, i % 10


def dead_mount_read() -> None:
    """A read that never returns: an NFS server gone, a FUSE mount wedged."""
    threading.Event().wait()


class SlowCollate:
    def __init__(self, ms: float, latency_ms: float = 0, stall_after: int = 0) -> None:
        self.ms, self.latency_ms, self.stall_after = ms, latency_ms, stall_after
        self.batches = 0  # per process: each worker has its own copy

    def __call__(self, items):
        self.batches += 1
        if self.stall_after and self.batches > self.stall_after:
            dead_mount_read()
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)  # waiting on a remote read: no CPU, no disk
        busy(self.ms)
        xs, ys = zip(*items, strict=True)
        return torch.stack(xs), torch.tensor(ys)


def loader(args: argparse.Namespace, dataset: Dataset | None = None, **kw) -> DataLoader:
    n = args.batch * max(args.steps, 1) + args.batch
    if dataset is None and args.data_file:
        dataset = DiskSamples(args.data_file, n, args.dim, args.sample_kb, args.data_mb)
    dataset = dataset or Synthetic(n, args.dim, in_memory_mb=args.dataset_mb)
    return DataLoader(
        dataset,
        batch_size=args.batch,
        num_workers=args.workers,
        pin_memory=args.pin_memory,
        collate_fn=SlowCollate(
            args.slow_transform_ms, args.read_latency_ms, args.loader_stall_after
        ),
        persistent_workers=args.workers > 0,
        **kw,
    )


def model(args: argparse.Namespace) -> nn.Module:
    deeper = []
    for _ in range(max(1, args.layers) - 1):
        deeper += [nn.Linear(args.hidden, args.hidden), nn.ReLU()]
    return nn.Sequential(
        nn.Linear(args.dim, args.hidden), nn.ReLU(), *deeper, nn.Linear(args.hidden, 10)
    )


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


class PyHeap:
    """Long-lived Python containers, like a dataset index loaded from JSON (a dict and a list
    per record) or a cache of decoded samples; ``churn()`` replaces 5 % of them every step.
    Each step's new records survive into the oldest generation, and CPython runs a full
    collection once such survivors exceed 25 % of it: one every few steps, traversing every
    record. Replaced records are freed by reference counting (there are no cycles): the
    collector finds nothing to free, so the pause is its traversal cost alone."""

    CHURN = 0.05

    def __init__(self, thousands: int) -> None:
        n = max(1, thousands) * 1000
        self.chunk = max(1, int(n * self.CHURN))
        self.made = 0
        self.chunks = [self._records() for _ in range(n // self.chunk)]
        self.oldest = 0

    def _records(self) -> list[dict]:
        first, self.made = self.made, self.made + self.chunk
        return [{"id": i, "bbox": [i % 640, i % 480, 32, 32]} for i in range(first, self.made)]

    def churn(self) -> None:
        self.chunks[self.oldest] = self._records()
        self.oldest = (self.oldest + 1) % len(self.chunks)


def py_heap(args: argparse.Namespace) -> PyHeap | None:
    return PyHeap(args.gc_heap) if args.gc_heap else None


def done(args: argparse.Namespace, step: int, started: float) -> bool:
    if step >= args.steps:
        return True
    return bool(args.seconds) and time.monotonic() - started >= args.seconds
