"""CPU cost of sampling 8 simulated GPUs at 10 Hz through the real pynvml bindings.

Target (issue #2): under 5% of one core. The figure includes the simulator's own work (the fake
library's entry points and its physics), which a real driver does in C, so it is an upper bound
on gputop's own cost; the simulator's share is measured separately in the same run by calling
the fake entry points directly for the same number of reads.

    python tests/bench/bench_nvml_sampling.py [--seconds 20] [--hz 10] [--board h100x8]
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from gputop.sim import SimBoard, SimProcess, install
from gputop.sources.nvml import NvmlSource
from gputop.sources.watchdog import Watchdog


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--board", default="h100x8")
    ap.add_argument("--scenario", default="compute")
    args = ap.parse_args()

    board = SimBoard(args.board, scenario=args.scenario, warmup_s=60)
    for d in board.devices:
        d.processes.append(SimProcess(os.getpid(), 20 << 30))
    board.measure_cpu = True
    install(board)
    watchdog = Watchdog("NVML", timeout=5.0)
    source = watchdog.call(NvmlSource.open)
    period = 1.0 / args.hz
    ticks = int(args.seconds * args.hz)

    cpu = {"thread": 0.0, "calls": 0, "sim": 0.0}

    def sampler() -> None:
        t0 = time.thread_time()
        c0 = board.calls
        s0 = board.sim_cpu_s
        nxt = time.monotonic()
        for _ in range(ticks):
            source.sample()
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))
        cpu["thread"] = time.thread_time() - t0
        cpu["calls"] = board.calls - c0
        cpu["sim"] = board.sim_cpu_s - s0

    wall0 = time.monotonic()
    proc0 = time.process_time()
    th = threading.Thread(target=sampler)
    th.start()
    th.join()
    wall = time.monotonic() - wall0
    proc = time.process_time() - proc0
    watchdog.call(source.close)

    per_tick_ms = cpu["thread"] / ticks * 1000
    calls_per_tick = cpu["calls"] / ticks
    print(f"board {args.board}, scenario {args.scenario}, {args.hz:g} Hz for {wall:.1f} s")
    print(f"NVML calls per tick (all devices): {calls_per_tick:.0f}")
    print(f"sampling thread CPU per tick:       {per_tick_ms:.2f} ms")
    print(f"sampling thread CPU, share of a core: {100 * cpu['thread'] / wall:.2f} %")
    print(f"whole process CPU, share of a core:  {100 * proc / wall:.2f} %")
    own = cpu["thread"] - cpu["sim"]
    print(f"of which inside the simulator:       {100 * cpu['sim'] / wall:.2f} %")
    print(f"gputop + pynvml alone, share of a core: {100 * own / wall:.2f} %")
    print(f"target: under 5 % of one core -> {'OK' if own / wall < 0.05 else 'MISSED'}")


if __name__ == "__main__":
    main()
