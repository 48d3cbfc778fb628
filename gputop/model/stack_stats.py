"""Statistics over a window of stack samples: where each thread spends its time, the hottest
frames, and whether a process's stacks have stopped changing (evidence for a hang). Pure."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gputop.model.roles import MAIN, WORKER
from gputop.model.stacks import PY_SPY, Frame, StacksSample, ThreadStack, reads
from gputop.vocab.stacks import (
    AGENT_PACKAGE_PREFIX,
    BACKWARD,
    BLOCKED,
    COLLECTIVE_WAIT,
    DATA_WAIT,
    FETCH,
    FORWARD,
    HOST_SYNC,
    IDLE,
    LOCK_WAIT,
    OPTIMIZER,
    SIDE_PHASES,
    USER_CODE,
)


@dataclass(frozen=True)
class ThreadShares:
    """One thread's phases over a window: where it spends its time, which one dump cannot show."""

    pid: int
    tid: int
    name: str
    role: str
    samples: int
    shares: tuple[tuple[str, float], ...]
    """(phase, share of this thread's samples), largest first."""
    last: ThreadStack
    ran: Mapping[str, int] = field(default_factory=dict)
    """Samples of each phase in which the thread was running or runnable
    (``ThreadStack.active``): in the dataset's fetch, computing its batch rather than asleep
    on a read."""


def thread_shares(window: Sequence[StacksSample], main_only: bool = False) -> list[ThreadShares]:
    """Each thread's phases over ``window`` (``main_only``: main threads alone, what the
    verdict reads; a torch rank has dozens of helper threads)."""
    counts: dict[tuple[int, int], Counter[str]] = {}
    ran: dict[tuple[int, int], Counter[str]] = {}
    last: dict[tuple[int, int], tuple[str, ThreadStack]] = {}
    for _, proc in reads(window):
        for t in proc.threads:
            if main_only and t.name != "MainThread":
                continue
            key = (proc.pid, t.tid)
            counts.setdefault(key, Counter())[t.phase] += 1
            ran.setdefault(key, Counter())[t.phase] += t.active
            last[key] = (proc.role, t)
    out = []
    for key, counter in counts.items():
        n = sum(counter.values())
        role, t = last[key]
        shares = tuple((p, c / n) for p, c in counter.most_common())
        out.append(ThreadShares(key[0], key[1], t.name, role, n, shares, t, ran[key]))
    out.sort(key=lambda s: (s.role != MAIN, s.role == WORKER, s.pid, s.name != "MainThread"))
    return out


def hottest_frames(window: Sequence[StacksSample], n: int = 5) -> list[tuple[Frame, int]]:
    """The deciding frames seen most often in active threads (what the CPU time goes to)."""
    c: Counter[Frame] = Counter()
    for _, proc in reads(window):
        for t in proc.threads:
            if t.active and t.deciding is not None:
                c[t.deciding] += 1
    return c.most_common(n)


def package(f: Frame) -> str:
    """The top-level module a frame's file belongs to (py-spy's short file names are
    module-relative: threading.py -> threading, torch/nn/modules/module.py -> torch). The copy
    of gputop's agent a job was given (``gputop_why_agent_<hash>``, wherever its folder was)
    is gputop."""
    if AGENT_PACKAGE_PREFIX in f.file:
        return "gputop"
    return f.file.split("/", 1)[0].removesuffix(".py")


def in_stdlib(f: Frame) -> bool:
    """Python's own library, or frozen/generated code ("<frozen importlib._bootstrap>")."""
    return package(f) in sys.stdlib_module_names or f.file.startswith("<")


def outside_stdlib(frames: Sequence[Frame]) -> Frame | None:
    """The innermost frame whose module is not in Python's standard library (frames innermost
    first)."""
    return next((f for f in frames if not in_stdlib(f)), None)


PAUSE_IDLE = 0.5
"""Share of idle dumps from which an earlier run of one stack counts as a pause of the job
(waiting), not as work that happened to sit on one line."""


@dataclass(frozen=True)
class Stillness:
    """How long a main or rank process's main thread has kept one stack, against how long it
    ever kept one before in the window: the job's own pauses, the cadence a hang is judged
    against when no agent counts steps."""

    pid: int
    role: str
    rank: int | None
    still_s: float
    """From the first dump of the current run of identical stacks to the latest dump."""
    dumps: int
    idle_share: float
    """Share of the run's dumps in which py-spy judged the thread idle. Its idle guess is a
    heuristic (a thread blocked in Queue.get was still called active in about one sample in
    ten: docs/facts/capture.md, "py-spy's idle flag"), so it is a share, read beside the
    process's CPU time."""
    before_s: float | None
    """The longest earlier quiet run of one stack in the window (the job's longest pause so
    far); None when there was none (the stack never moved in the window, or never paused)."""
    phase: str
    leaf: Frame | None
    """Where it waits: the phase's deciding frame, else the innermost frame."""
    caller: Frame | None
    """The innermost frame outside Python's own library: the code that chose to wait."""
    via: str = PY_SPY
    """Who read its latest stack: its agent, or py-spy (when the agent's samples stopped)."""
    age_s: float | None = None
    """How old that read is at the window's last reading (None: not known)."""

    @property
    def label(self) -> str:
        """'rank 1 (pid 4242)', or 'pid 4242' for a process with no rank: as findings name it."""
        return f"rank {self.rank} (pid {self.pid})" if self.rank is not None else f"pid {self.pid}"


LIBRARIES = frozenset({
    "torch", "torchvision", "torchaudio", "gputop", "numpy", "triton", "accelerate",
    "transformers", "lightning", "pytorch_lightning", "deepspeed", "tqdm", "wandb",
    "tensorboard", "PIL", "datasets", "multiprocess",
})  # fmt: skip
"""Packages whose frames are not the job's own code (py-spy names site-packages files by
their package path: torch/nn/modules/module.py)."""


def user_frame(frames: Sequence[Frame]) -> Frame | None:
    """The innermost frame of the job's own code: outside the stdlib and the libraries above
    (the line in train.py that called into torch, not the agent's hook inside backward)."""
    own = next((f for f in frames if not in_stdlib(f) and package(f) not in LIBRARIES), None)
    return own or outside_stdlib(frames)


TRAINING = frozenset({FETCH, DATA_WAIT, FORWARD, BACKWARD, OPTIMIZER, COLLECTIVE_WAIT, HOST_SYNC})
"""Phases of a training loop at work: a main thread seen in one has begun to train."""


@dataclass(frozen=True)
class OwnCode:
    """Where a training loop's main threads spend time in the job's own code (no phase)."""

    share: float
    """Share of their samples since they began to train (setup before that is not the loop)."""
    samples: int
    at: tuple[tuple[Frame, float], ...]
    """The functions, with their share of those samples, largest first; the frame kept is the
    line seen most often in the function."""


def own_code(window: Sequence[StacksSample], n: int = 2) -> OwnCode | None:
    """The main threads' (main process and ranks, not DataLoader workers) "user code" time in
    the loop: counted from each thread's first sample in a ``TRAINING`` phase, by function, so
    the lines inside one add up. None when no main thread has begun to train."""
    by_function: Counter[tuple[str, str]] = Counter()
    lines: dict[tuple[str, str], Counter[Frame]] = {}
    training: set[tuple[int, int]] = set()
    total = user = 0
    for _, proc in reads(window):
        if proc.role == WORKER:
            continue
        for t in proc.threads:
            if t.name != "MainThread":
                continue
            key = (proc.pid, t.tid)
            if t.phase in TRAINING:
                training.add(key)
            if key not in training:
                continue
            total += 1
            own = user_frame(t.frames) if t.phase == USER_CODE else None
            if own is None:
                continue
            user += 1
            fn = (own.file, own.name)
            by_function[fn] += 1
            lines.setdefault(fn, Counter())[own] += 1
    if not total:
        return None
    at = tuple(
        (lines[fn].most_common(1)[0][0], count / total) for fn, count in by_function.most_common(n)
    )
    return OwnCode(user / total, total, at)


def waits_in(t: ThreadStack, by_phase: bool = True) -> Frame | None:
    """The frame to name as where a thread waits: the one its phase was decided by (a
    collective, the DataLoader), else the outermost library frame its own code called
    (Queue.get rather than the Condition.wait inside it), else its innermost frame."""
    if by_phase and t.phase not in (BLOCKED, LOCK_WAIT, IDLE, USER_CODE) and t.deciding:
        return t.deciding
    caller = user_frame(t.frames)
    if caller is not None:
        i = t.frames.index(caller)
        return t.frames[i - 1] if i > 0 else caller
    return t.frames[0] if t.frames else None


def stillness(window: Sequence[StacksSample]) -> list[Stillness]:
    """Each main and rank process's main thread: its current run of one stack and the longest
    earlier one, for the processes of the latest reading (one that exited, a helper that
    finished or died, neither moves nor waits). Times come from the samples' clocks, so a
    slower dump rate counts right."""
    out = []
    ranks: dict[int, tuple[str, int | None]] = {}
    history: dict[int, list[tuple[float, ThreadStack]]] = {}
    readers: dict[int, tuple[str, float | None]] = {}
    for sample, proc in reads(window):
        if proc.role == WORKER or proc.error:
            continue
        main = next((t for t in proc.threads if t.name == "MainThread"), None)
        if main is not None:
            at = proc.read_at(sample.t)
            history.setdefault(proc.pid, []).append((at, main))
            ranks[proc.pid] = (proc.role, proc.rank)
            readers[proc.pid] = (proc.via, proc.taken)
    now = window[-1].t if window else 0.0
    alive = {proc.pid for proc in window[-1].processes} if window else set()
    for pid, stacks in history.items():
        if pid not in alive:
            continue  # exited (a helper that finished or died): it no longer moves or waits
        runs: list[tuple[float, float, int, int]] = []  # (first t, last t, dumps, idle dumps)
        prev: ThreadStack | None = None
        for t, th in stacks:
            if prev is not None and th.frames == prev.frames:
                first, _, n, idle = runs[-1]
                runs[-1] = (first, t, n + 1, idle + (not th.active))
            else:
                runs.append((t, t, 1, int(not th.active)))
            prev = th
        first, last_t, dumps, idle = runs[-1]
        earlier = [b - a for a, b, n, i in runs[:-1] if i >= PAUSE_IDLE * n]
        last = stacks[-1][1]
        role, rank = ranks[pid]
        via, taken = readers[pid]
        out.append(
            Stillness(
                pid=pid,
                role=role,
                rank=rank,
                still_s=last_t - first,
                dumps=dumps,
                idle_share=idle / dumps,
                before_s=max(earlier) if earlier else None,
                phase=last.phase,
                leaf=waits_in(last),
                caller=user_frame(last.frames),
                via=via,
                age_s=max(0.0, now - taken) if taken is not None else None,
            )
        )
    return out


def worker_mains(window: Sequence[StacksSample]) -> dict[int, ThreadStack]:
    """Each DataLoader worker's main thread as last dumped (workers are dumped in turn, so
    this may be a few seconds old): where a worker that does nothing sits."""
    if not window:
        return {}
    alive = {p.pid for p in window[-1].processes if p.role == WORKER}
    out: dict[int, ThreadStack] = {}
    for sample in window:
        for proc in sample.processes:
            if proc.pid in alive and not proc.error:
                main = next((t for t in proc.threads if t.name == "MainThread"), None)
                if main is not None:
                    out[proc.pid] = main
    return out


@dataclass(frozen=True)
class MainPhases:
    """One main or rank process's main thread over the window, counted from its first sample
    in a ``TRAINING`` phase (setup before that is not the loop): the stack source's view of
    where its time goes, for the step-time budget."""

    pid: int
    role: str
    rank: int | None
    samples: int
    counts: tuple[tuple[str, int], ...]
    """(phase, samples), largest first."""
    span_s: float
    """From its first training sample to its last sample."""
    outside: tuple[tuple[str, int], ...] = ()
    """(phase, samples) of the reads taken from outside the process (py-spy), largest first:
    taken whatever the job's GIL does, so their shares may size a slice. The agent's own
    samples wait for the GIL (a stretch of pure Python shorter than the switch interval is
    under-counted, the code after a C call over-counted): they name, never size."""

    @property
    def outside_samples(self) -> int:
        return sum(n for _, n in self.outside)


TORCH_OP = "torch op"
"""A main thread in a torch function its own code called (``F.cross_entropy``, ``x @ w``):
the model's work outside a module, not the loop's own Python (``main_phases`` only)."""


def main_phases(window: Sequence[StacksSample]) -> list[MainPhases]:
    """Each main and rank process's main-thread phases since it began to train (its first
    sample in a training phase or in side work: setup before that is not the loop); processes
    that never trained in the window (a launcher, a job still loading) are left out."""
    counts: dict[int, Counter[str]] = {}
    outside: dict[int, Counter[str]] = {}
    first: dict[int, float] = {}
    last: dict[int, tuple[float, str, int | None]] = {}
    for sample, proc in reads(window):
        if proc.role == WORKER or proc.error:
            continue
        main = next((t for t in proc.threads if t.name == "MainThread"), None)
        if main is None:
            continue
        pid = proc.pid
        at = proc.read_at(sample.t)
        if pid not in first:
            if main.phase not in TRAINING and main.phase not in SIDE_PHASES:
                continue
            first[pid] = at
            counts[pid], outside[pid] = Counter(), Counter()
        phase = main.phase
        if phase == USER_CODE and main.frames and package(main.frames[0]) == "torch":
            phase = TORCH_OP
        counts[pid][phase] += 1
        if proc.via == PY_SPY:
            outside[pid][phase] += 1
        last[pid] = (at, proc.role, proc.rank)
    out = []
    for pid, c in counts.items():
        t, role, rank = last[pid]
        out.append(
            MainPhases(pid, role, rank, sum(c.values()), tuple(c.most_common()), t - first[pid],
                       tuple(outside[pid].most_common()))
        )  # fmt: skip
    return out
