"""Time to compute the verdict over a 10-minute window of 8 GPUs with host, stacks and agent
data (as the TUI does on every refresh), the step-time budget of every rank included. Target
(issues 7 and 25): under 5 ms on 8 ranks.

    python tests/bench/bench_verdict.py [--repeat 50] [--steps 512]

Each tick brings one reading of every source, with an evaluation after each (as the session
runs it); the figures are per evaluation. ``--steps``: steps each agent has reported (512, the
agent's history, is the most a budget reads; the spike window and the budget read up to 512
steps of the last 120 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from gputop.diagnose import State, evaluate, reduce_windows
from gputop.model import Timeline
from gputop.model.steps import AgentsSample
from gputop.render.budget import budget_line
from gputop.sim import SimBoard, installed
from gputop.sources.nvml import NvmlSource

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tui"))
from conftest import agents_sample, host_sample, stacks_window


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=50, help="ticks (four evaluations each)")
    ap.add_argument("--steps", type=int, default=512)
    args = ap.parse_args()
    clock = [0.0]
    tl = Timeline()
    board = SimBoard("h100x8", scenario="mixed", clock=lambda: clock[0], warmup_s=60)
    with installed(board):
        src = NvmlSource.open(clock=lambda: clock[0])
        for _ in range(600):  # 10 minutes at 1 Hz
            clock[0] += 1.0
            tl.extend(src.sample())
        devices = src.devices
        host = host_sample()
        for t in range(600):
            tl.append(host.key, replace(host, t=float(t)))
        stacks = stacks_window()
        history = agents_sample(ranks=8, slow_rank=3, steps_kept=args.steps + args.repeat + 1)
        agents = reading(history, 0, args.steps)
        state = State()
        kinds = ("a new GPU reading", "a new agents' reading", "host", "stacks")
        took: dict[str, list[float]] = {k: [] for k in kinds}
        first = 0.0
        for tick in range(args.repeat + 1):
            # one tick: each source's reading, the verdict after each (as the session does);
            # the host's and the stacks' readings change nothing the verdict caches
            for kind in kinds:
                if kind == kinds[0]:
                    clock[0] += 1.0
                    tl.extend(src.sample())
                elif kind == kinds[1]:  # one step more, the oldest gone
                    agents = reading(history, tick, args.steps)
                now = clock[0]
                t0 = time.perf_counter()
                gpus = [tl.window(("gpu", d.index), now, 600) for d in devices]
                hw = tl.window(host.key, 600.0, 600)
                sig = reduce_windows(gpus, devices, host=hw, agents=agents, stacks=_Window(stacks))
                verdict, state = evaluate(sig, now, state)
                spent = time.perf_counter() - t0
                if tick == 0:
                    first = max(first, spent)  # every step and reading new to the caches
                else:
                    took[kind].append(spent)
        src.close()
    print(
        f"window: 600 s x 8 GPUs ({len(tl)} samples held), host, 8 agents x {args.steps} "
        "steps, stacks; each tick: a GPU, an agents', a host and a stacks reading"
    )
    if verdict.budget is not None:
        print(f"budget: {budget_line(verdict.budget)} [{verdict.budget.source}]")
    print(f"verdict: {verdict.principal.bound if verdict.principal else verdict.note}")
    every = [t for ts in took.values() for t in ts]
    print(
        f"time per verdict: mean {statistics.fmean(every) * 1000:.2f} ms over a tick's four,"
        f" max {max(every) * 1000:.2f} ms (target < 5 ms)"
    )
    for kind, ts in took.items():
        print(
            f"  after {kind}: median {statistics.median(ts) * 1000:.2f} ms,"
            f" max {max(ts) * 1000:.2f} ms"
        )
    print(f"the very first (every step new): {first * 1000:.2f} ms")


def reading(history: AgentsSample, k: int, kept: int) -> AgentsSample:
    """The k-th agents' reading: each agent's ``kept`` steps from its k-th, a new tuple of
    the same step objects (as the agent link hands them over)."""
    agents = tuple(replace(a, steps=tuple(a.steps[k : k + kept])) for a in history.agents)
    return replace(history, agents=agents)


class _Window:
    def __init__(self, samples) -> None:
        self.samples = tuple(samples)


if __name__ == "__main__":
    main()
