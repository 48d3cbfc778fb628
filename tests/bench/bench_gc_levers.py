"""What each garbage-collection lever does to a loop's throughput: the facts the GC levers and
their estimated saving rest on (docs/facts/bounds.md, "GC levers").

Two heaps, each against the same busy step: long-lived records of which 5% are replaced every
step (a dataset index or cache that turns over: full collections dominate), and per-step
records in reference cycles kept for 200 steps (bookkeeping: young collections dominate). Each
lever is applied once after setup; every run lasts --seconds and reports steps per second and
the share of wall time in the collector (gc.callbacks).

    python tests/bench/bench_gc_levers.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import collections, gc, sys, time
heap, lever, seconds, corpus = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
sys.path.insert(0, corpus)
from gc_pressure import bookkeeping  # per-step records in cycles, as the corpus script makes

chunks = [[{"id": i, "bbox": [i, i, 32, 32]} for i in range(5000)] for _ in range(20)]
recent = collections.deque(maxlen=200)
spent, t0 = [0.0], [0.0]


def timed(phase, info):
    if phase == "start":
        t0[0] = time.perf_counter()
    else:
        spent[0] += time.perf_counter() - t0[0]


gc.callbacks.append(timed)
if lever == "freeze":
    gc.freeze()
elif lever == "threshold":
    gc.set_threshold(50_000, 20, 20)
elif lever == "disable":
    gc.disable()
start, steps = time.perf_counter(), 0
while time.perf_counter() - start < seconds:
    s = 0
    for i in range(100_000):
        s += i * i
    if heap == "turnover":
        chunks[steps % 20] = [{"id": i, "bbox": [i, i, 32, 32]} for i in range(5000)]
    else:
        recent.append(bookkeeping(steps))
    steps += 1
    if lever == "disable" and steps % 100 == 0:
        gc.collect()
wall = time.perf_counter() - start
print(f"{steps / wall:.1f} {spent[0] / wall:.4f}")
"""
CORPUS = Path(__file__).resolve().parents[1] / "corpus"
LEVERS = ("none", "threshold", "freeze", "disable")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    print(f"{'heap':10} {'lever':10} {'steps/s':>8} {'GC share':>9} {'speedup':>8}")
    for heap in ("turnover", "cycles"):
        base = None
        for lever in LEVERS:
            argv = [sys.executable, "-c", CHILD, heap, lever, str(args.seconds), str(CORPUS)]
            out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
            rate, share = float(out[0]), float(out[1])
            base = base or rate
            print(f"{heap:10} {lever:10} {rate:8.1f} {share:9.1%} {rate / base:7.2f}x")


if __name__ == "__main__":
    main()
