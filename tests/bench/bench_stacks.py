"""What sampling Python stacks costs: per dump, to the target, and for the sampler.

1. Time per `py-spy dump` and the stall it causes in the target (a loop inside the target
   records every gap in its own progress; the stall of a dump is the longest gap inside the
   dump's window, on the shared CLOCK_MONOTONIC), nonblocking vs blocking.
2. The sampler's CPU at its default rate (one dump per second per main process) against a
   target with a few dozen threads, py-spy's own CPU included. Target: under 3 % of one core,
   with a target stall near zero.

    python tests/bench/bench_stacks.py [--dumps 30] [--seconds 20]
"""

from __future__ import annotations

import argparse
import resource
import signal
import statistics
import subprocess
import sys
import time

from gputop.sources.stacks import PySpy, StackSource

TARGET = """
import signal, sys, threading, time
for _ in range(40):
    threading.Thread(target=threading.Event().wait, daemon=True).start()
gaps = []
def done(*_):
    print(" ".join(f"{a:.6f}:{b:.6f}" for a, b in gaps), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, done)
print("ready", flush=True)
last = time.monotonic()
while True:
    now = time.monotonic()
    if now - last > 0.0005:
        gaps.append((last, now))
    last = now
"""


def start() -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", TARGET], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    return p


def stalls(dumps: int, blocking: bool) -> tuple[list[float], list[float]]:
    p = start()
    spy = PySpy()
    windows, times = [], []
    for _ in range(dumps):
        t0 = time.monotonic()
        _, error = spy.dump(p.pid, blocking=blocking)
        t1 = time.monotonic()
        assert error is None, error
        windows.append((t0, t1))
        times.append(t1 - t0)
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=10)
    gaps = [tuple(map(float, g.split(":"))) for g in out.split()]
    worst = []
    for t0, t1 in windows:
        inside = [b - a for a, b in gaps if a < t1 and b > t0]
        worst.append(max(inside, default=0.0))
    return times, worst


def sampler_cpu(seconds: float) -> float:
    p = start()
    source = StackSource(p.pid)
    self0 = time.thread_time()
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        tick = time.monotonic()
        source.sample()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    wall = time.monotonic() - t0
    own = time.thread_time() - self0
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=10)
    kids = (kids1.ru_utime - kids0.ru_utime) + (kids1.ru_stime - kids0.ru_stime)
    return 100 * (own + kids) / wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dumps", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=20)
    args = ap.parse_args()
    print(f"target: 41 Python threads; {args.dumps} dumps per mode")
    print(
        f"{'mode':<12} {'dump median':>12} {'stall median':>13} {'stall p90':>10} {'stall max':>10}"
    )
    for name, blocking in (("nonblocking", False), ("blocking", True)):
        times, worst = stalls(args.dumps, blocking)
        ws = sorted(worst)
        print(
            f"{name:<12} {statistics.median(times) * 1000:>10.1f}ms"
            f" {statistics.median(ws) * 1000:>11.2f}ms {ws[int(len(ws) * 0.9)] * 1000:>8.2f}ms"
            f" {ws[-1] * 1000:>8.2f}ms"
        )
    share = sampler_cpu(args.seconds)
    print(f"sampler at 1 dump/s for {args.seconds:g} s, py-spy included: {share:.2f} % of one core")
    print("target: < 3 % of one core, stall near zero (nonblocking)")


if __name__ == "__main__":
    main()
