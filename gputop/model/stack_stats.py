"""Statistics over a window of stack samples: where each thread spends its time, the hottest
frames, and whether a process's stacks have stopped changing (evidence for a hang). Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gputop.model.stacks import Frame, StacksSample, ThreadStack

PARKED_PHASES = frozenset({"collective wait", "lock wait", "blocked", "host sync"})
"""Where a stuck process sits. A main thread may legitimately show the same data-loading or
transform frames for many dumps in a row, so those are not hang suspects."""


@dataclass(frozen=True)
class ThreadShares:
    pid: int
    tid: int
    name: str
    role: str
    samples: int
    shares: tuple[tuple[str, float], ...]
    """(phase, share of this thread's samples), largest first."""
    last: ThreadStack


def thread_shares(window: Sequence[StacksSample]) -> list[ThreadShares]:
    counts: dict[tuple[int, int], Counter[str]] = {}
    last: dict[tuple[int, int], tuple[str, ThreadStack]] = {}
    for sample in window:
        for proc in sample.processes:
            for t in proc.threads:
                key = (proc.pid, t.tid)
                counts.setdefault(key, Counter())[t.phase] += 1
                last[key] = (proc.role, t)
    out = []
    for key, counter in counts.items():
        n = sum(counter.values())
        role, t = last[key]
        shares = tuple((p, c / n) for p, c in counter.most_common())
        out.append(ThreadShares(key[0], key[1], t.name, role, n, shares, t))
    out.sort(key=lambda s: (s.role != "main", s.role == "worker", s.pid, s.name != "MainThread"))
    return out


def hottest_frames(window: Sequence[StacksSample], n: int = 5) -> list[tuple[Frame, int]]:
    """The deciding frames seen most often in active threads (what the CPU time goes to)."""
    c: Counter[Frame] = Counter()
    for sample in window:
        for proc in sample.processes:
            for t in proc.threads:
                if t.active and t.deciding is not None:
                    c[t.deciding] += 1
    return c.most_common(n)


@dataclass(frozen=True)
class Unchanged:
    pid: int
    samples: int
    """How many consecutive latest samples had the same main-thread stack."""
    parked: Frame | None
    """Where it waits, when that is a collective, a lock, a queue or a sync."""
    phase: str


def unchanged_stacks(window: Sequence[StacksSample], min_samples: int = 5) -> list[Unchanged]:
    """Processes whose main thread has shown the same stack for the last ``min_samples``
    samples or more: a hang, or a very long phase."""
    history: dict[int, list[ThreadStack]] = {}
    for sample in window:
        for proc in sample.processes:
            if proc.role == "worker":
                continue  # a worker in the same transform line for a while is not a hang
            main = next((t for t in proc.threads if t.name == "MainThread"), None)
            if main is not None:
                history.setdefault(proc.pid, []).append(main)
    out = []
    for pid, stacks in history.items():
        same = 1
        for prev in reversed(stacks[:-1]):
            if prev.frames != stacks[-1].frames:
                break
            same += 1
        last = stacks[-1]
        if same >= min_samples and last.phase in PARKED_PHASES:
            out.append(Unchanged(pid, same, last.deciding, last.phase))
    return out
