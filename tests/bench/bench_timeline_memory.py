"""Memory of a Timeline fed 24 hours of 1 Hz samples for 8 GPUs.

Target (issue #2): flat once the ring buffers are full. Prints the traced Python memory held
after each simulated hour; the growth over the hours after the buffers filled should be ~0.

    python tests/bench/bench_timeline_memory.py [--hours 24] [--gpus 8] [--capacity 4096]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

from gputop.model import DEFAULT_CAPACITY, GpuProcess, GpuSample, Timeline

PROC = (GpuProcess(4242, 4242, None, 20 << 30, 97, 40),)


def sample(i: int, t: float) -> GpuSample:
    k = int(t) % 100
    return GpuSample(
        index=i,
        t=t,
        wall=1.8e9 + t,
        sm_clock_mhz=1980 - k,
        graphics_clock_mhz=1980 - k,
        mem_clock_mhz=2619,
        power_w=600.0 + k,
        power_limit_w=700.0,
        energy_j=650.0 * t,
        temp_c=60 + k % 7,
        util_gpu_pct=97,
        util_mem_pct=40,
        mem_used_bytes=(20 << 30) + k,
        mem_reserved_bytes=480 << 20,
        mem_free_bytes=(60 << 30) - k,
        reasons_mask=0,
        pcie_tx_kbps=500 + k,
        pcie_rx_kbps=900_000 + k,
        pcie_gen=5,
        pcie_width=16,
        nvlink_tx_kibps=1.0e6 + k,
        nvlink_rx_kibps=1.0e6 + k,
        sm_active_pct=90.0 + k / 100,
        sm_occupancy_pct=50.0,
        tensor_active_pct=70.0,
        dram_bw_pct=45.0,
        processes=PROC,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--capacity", type=int, default=DEFAULT_CAPACITY)
    args = ap.parse_args()

    tracemalloc.start()
    tl = Timeline(capacity=args.capacity)
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    full_at_h = args.capacity / 3600
    print(f"{args.gpus} GPUs, 1 Hz, ring capacity {args.capacity} (full after {full_at_h:.2f} h)")
    print(f"{'hour':>4} {'samples held':>12} {'MiB held':>9}")
    started = time.perf_counter()
    after_full: list[float] = []
    for hour in range(1, args.hours + 1):
        for s in range((hour - 1) * 3600, hour * 3600):
            for i in range(args.gpus):
                tl.append(("gpu", i), sample(i, float(s)))
        gc.collect()
        mib = (tracemalloc.get_traced_memory()[0] - base) / 2**20
        if hour > full_at_h:
            after_full.append(mib)
        print(f"{hour:>4} {len(tl):>12} {mib:>9.2f}")
    elapsed = time.perf_counter() - started
    if len(after_full) > 1:
        growth = after_full[-1] - after_full[0]
        print(f"growth after the buffers filled: {growth:+.3f} MiB over {len(after_full) - 1} h")
        print(f"target: flat -> {'OK' if abs(growth) < 0.05 * max(after_full[0], 1) else 'MISSED'}")
    print(f"fed {args.hours * 3600 * args.gpus} samples in {elapsed:.1f} s (tracemalloc on)")


if __name__ == "__main__":
    main()
