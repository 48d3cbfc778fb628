"""How long a healthy job goes between steps, against its own recent tail: the figure the hang
rule's k (``thresholds.HANG_K``: no step for max(10 s, k x p99 step)) is chosen from.

Runs corpus scripts with a global optimizer-step hook (no gputop code in the job), optionally
with one core kept busy, and prints per script the worst gap between steps divided by the p99
of the preceding 50 steps (the agent's window, ``model.step_stats.WINDOW``).

    python tests/bench/bench_step_gaps.py [--seconds 15] [--busy] [SCRIPT ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
WINDOW = 50
DEFAULT = ("healthy_mlp", "eval_every_n", "frequent_checkpoints", "transform_in_loop",
           "remote_reads")  # fmt: skip

PROBE = r"""
import atexit, runpy, sys, time
from torch.optim.optimizer import register_optimizer_step_post_hook
ts = []
register_optimizer_step_post_hook(lambda *a: ts.append(time.perf_counter()))
def report():
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    worst, at = 0.0, (0.0, 0.0)
    for i in range(30, len(gaps)):
        prev = sorted(gaps[max(0, i - WINDOW):i])
        p99 = prev[int(0.99 * (len(prev) - 1))]
        if gaps[i] / p99 > worst:
            worst, at = gaps[i] / p99, (gaps[i], p99)
    print(f"RESULT {len(ts)} {worst:.2f} {at[0] * 1000:.0f} {at[1] * 1000:.0f}")
atexit.register(report)
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scripts", nargs="*", default=DEFAULT)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--busy", action="store_true", help="keep one core busy meanwhile")
    args = ap.parse_args()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    try:
        print(f"{'script':24} {'steps':>6} {'worst gap / p99':>16} {'gap':>8} {'p99':>8}")
        for name in args.scripts:
            out = subprocess.run(
                [sys.executable, "-c", f"WINDOW = {WINDOW}\n{PROBE}",
                 str(CORPUS / f"{name}.py"), "--seconds", str(args.seconds)],
                capture_output=True, text=True, cwd=CORPUS, timeout=args.seconds + 120,
            )  # fmt: skip
            line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT")), None)
            if line is None:
                print(f"{name:24} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            _, steps, ratio, gap, p99 = line.split()
            print(f"{name:24} {steps:>6} {ratio:>16} {gap + ' ms':>8} {p99 + ' ms':>8}")
    finally:
        if busy is not None:
            busy.kill()


if __name__ == "__main__":
    main()
