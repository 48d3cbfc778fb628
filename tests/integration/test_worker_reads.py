"""py-spy's budget on a real process tree: a rank's DataLoader workers are read in turn, often
while the rank waits for data and rarely while it does not (their stacks say why it waits)."""

from __future__ import annotations

import subprocess
import sys

from tests_support import kill_tree, until

from gputop.model.roles import WORKER
from gputop.model.stacks import Frame, ThreadStack
from gputop.sources.stack_budget import QUIET_SLOWER, WORKER_TURN, StackBudget
from gputop.sources.stacks import StackSource
from gputop.vocab.stacks import DATA_WAIT, FETCH, FORWARD

TREE = r"""
import ctypes, os, sys, time
for _ in range(4):
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"pt_data_worker", 0, 0, 0)
        time.sleep(600)
        os._exit(0)
print("ready", flush=True)
time.sleep(600)
"""


class Spy:
    """py-spy's place: the rank's main thread in ``rank_phase``, every worker busy fetching (a
    new line at each read: never settled); counts its reads."""

    binary = "py-spy"

    def __init__(self, rank: int, rank_phase: str) -> None:
        self.rank, self.rank_phase, self.read = rank, rank_phase, []

    def dump(self, pid: int):
        self.read.append(pid)
        phase = self.rank_phase if pid == self.rank else FETCH
        frames = (Frame("__getitem__", "data.py", len(self.read)),)
        return [ThreadStack(pid, "MainThread", True, frames, phase, None)], None


def worker_reads(rank_phase: str, seconds: int = 240) -> tuple[int, int]:
    """(reads of the workers, workers) over ``seconds`` of a clock the test moves."""
    p = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        now = [0.0]
        spy = Spy(p.pid, rank_phase)
        source = StackSource(p.pid, spy=spy, clock=lambda: now[0], budget=StackBudget(1.0))  # type: ignore[arg-type]

        def four_workers() -> bool:
            if len([r for _, r in source.tree() if r == WORKER]) >= 4:
                return True
            now[0] += 60.0  # the tree is walked again (forked children name themselves late)
            return False

        until(four_workers, timeout=20, what="the tree's four workers named")
        workers = {pid for pid, r in source.tree() if r == WORKER}
        start = now[0]
        for second in range(seconds):
            now[0] = start + second
            source.sample()
        return sum(1 for pid in spy.read if pid in workers), len(workers)
    finally:
        kill_tree(p)  # its four forked workers too: they would sleep on for ten minutes


def test_workers_are_read_in_turn_while_their_rank_waits_for_data():
    waiting, n = worker_reads(DATA_WAIT)
    assert n == 4
    assert waiting >= 240 / WORKER_TURN - 2, waiting
    computing, _ = worker_reads(FORWARD)
    assert computing <= 240 / (WORKER_TURN * QUIET_SLOWER) + 2, computing
