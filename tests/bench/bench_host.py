"""CPU cost of the host source on a target with 50 threads and 8 forked children.

Target (issue #4): a tick costs a few milliseconds, and the average is under 1 % of one core
at the default interval. Ticks are driven by a simulated clock (1 s apart) so the tiers fire
as they would live (threads every 3 s, smaps/environ every 30 s), while every read is real.

    python tests/bench/bench_host.py [--ticks 120]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

from gputop.sources.host import HostSource

TARGET = """
import hashlib, os, threading, time
stop = threading.Event()
def idle():
    stop.wait()
def light():
    data = b"x" * (1 << 16)
    while True:
        t = time.monotonic()
        while time.monotonic() - t < 0.02:
            hashlib.sha256(data).digest()
        time.sleep(0.08)
for i in range(49):
    threading.Thread(target=light if i < 3 else idle, daemon=True).start()
kids = []
for _ in range(8):
    pid = os.fork()
    if pid == 0:
        for _ in range(2):
            threading.Thread(target=idle, daemon=True).start()
        while True:
            time.sleep(1)
    kids.append(pid)
print("ready", flush=True)
stop.wait()
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=120)
    args = ap.parse_args()
    p = subprocess.Popen(
        [sys.executable, "-c", TARGET], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert p.stdout.readline().strip() == "ready"
    clock = [0.0]
    try:
        src = HostSource.open(p.pid, clock=lambda: clock[0])
        costs = []
        for _ in range(args.ticks):
            clock[0] += 1.0
            t0 = time.thread_time()
            s = src.sample()
            costs.append(time.thread_time() - t0)
            time.sleep(0.02)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    threads = sum(proc.num_threads for proc in s.processes)
    ms = [c * 1000 for c in costs[1:]]
    total = sum(costs[1:])
    print(f"target: {len(s.processes)} processes, {threads} threads")
    p90 = sorted(ms)[int(len(ms) * 0.9)]
    median = statistics.median(ms)
    print(f"tick CPU: median {median:.2f} ms, p90 {p90:.2f} ms, max {max(ms):.2f} ms")
    for interval in (1.0, 2.0):
        share = 100 * total / (len(ms) * interval)
        print(f"average at a {interval:g} s interval: {share:.2f} % of one core")
    print("target: a few ms per tick, average < 1 % of one core")


if __name__ == "__main__":
    main()
