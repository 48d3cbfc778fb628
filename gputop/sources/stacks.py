"""Live Python stacks of the target's processes: from each process's own agent when it has one
(``gputop/agent/stacks.py``: no ptrace, no new process), else from `py-spy dump --json
--nonblocking` within a CPU budget (``stack_budget.py``).

py-spy is a CLI only, and `dump --subprocesses --json` returns the parent alone, so each
process is dumped on its own. Dumps are nonblocking (a blocking dump pauses every thread of the
target); blocking or --native only on request. Each dump has a timeout, failures back off per
process, and py-spy's errors become one-line instructions. A process whose agent stops sending
(a thread holding the GIL in C: a hang must still be named) is read by py-spy at once.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from gputop.model.frame_kinds import wants_code
from gputop.model.roles import CHILD, RANK, WORKER, RankId, RoleHint, merge_hints, rank_above, roles
from gputop.model.stacks import (
    AGENT,
    PY_SPY,
    Frame,
    ProcessStacks,
    SocketPeer,
    StacksSample,
    ThreadStack,
    pipe_read,
    socket_read,
)
from gputop.sources.proc_tree import ProcTree
from gputop.sources.procfs import runs_python, start_ticks
from gputop.sources.sockets import socket_peer
from gputop.sources.source_lines import code_line
from gputop.sources.stack_budget import WAITED_LATELY_S, Candidate, StackBudget
from gputop.sources.stack_phases import RawFrame, thread_stack
from gputop.sources.syscalls import pipe_writers, waits_in
from gputop.sources.target import TargetId
from gputop.vocab.stacks import DATA_WAIT, STACK_DEPTH, STACKS_PERIOD_S

DUMP_TIMEOUT_S = 5.0
BACKOFF_MAX_S = 60.0
KERNEL_ASKED = 16
"""Parked threads of one process whose kernel wait is read at each read of its stacks."""
PARKED_READS = 2
"""Reads in a row that found a process's stacks unchanged before the other end of its pipe
or socket reads is looked for (a hang is called only after 10 s of stillness)."""
ENDS_KEPT_S = 10.0
"""Seconds a pipe's writers or a socket's peer, once looked up, stand for the same read."""
ENDS_KEPT_MAX = 256
"""Looked-up ends kept at most (all forgotten past it: a bound on memory)."""


def find_py_spy() -> str | None:
    """The py-spy installed with gputop (next to this Python), else one on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    try:
        if here.is_file() and os.access(here, os.X_OK):
            return str(here)
    except OSError:  # the environment's folder is not ours to read (another user's venv)
        pass
    return shutil.which("py-spy")


NOT_PYTHON = "is not a Python process"
"""What py-spy's answer for a process without a Python it can read is said with."""
NO_PY_SPY = "py-spy is not installed: stacks need it (pip install py-spy, or reinstall gputop)"


def explain(stderr: str, returncode: int | None, pid: int) -> str:
    """py-spy's error as what happened and what to do, in one line."""
    text = stderr.strip()
    if (
        "Permission Denied" in text
        or "Permission denied (os error 13)" in text
        or "Operation not permitted" in text
    ):
        return (
            f"not allowed to read pid {pid}'s memory (ptrace): run gputop as the same user or "
            "root; check /proc/sys/kernel/yama/ptrace_scope (1 allows only parents; set 0 or "
            "use sudo); in a container add --cap-add SYS_PTRACE"
        )
    if "No such file or directory (os error 2)" in text or "No such process" in text:
        return f"pid {pid} has exited"
    if "Failed to find python version" in text or "not a python" in text.lower():
        return f"pid {pid} {NOT_PYTHON} this py-spy can read (Python version unsupported?)"
    if returncode is None:
        return f"py-spy did not finish within {DUMP_TIMEOUT_S:g} s for pid {pid}"
    first = text.splitlines()[0] if text else f"exit status {returncode}"
    return f"py-spy failed on pid {pid}: {first[:200]}"


def parse_dump(raw: str, pid: int | None = None) -> list[ThreadStack]:
    """py-spy's JSON array, each thread classified. Malformed entries are skipped. With the
    ``pid`` it was read from, a thread's innermost frame in the job's own code carries its
    source line (``source_lines.code_line``: the C call it is in)."""
    threads = []
    for t in json.loads(raw):
        if not isinstance(t, dict):
            continue
        frames: list[RawFrame] = [
            (
                str(f.get("name", "?")),
                str(f.get("short_filename") or f.get("filename") or "?"),
                f.get("line") if isinstance(f.get("line"), int) else None,
            )
            for f in t.get("frames", [])[:STACK_DEPTH]
            if isinstance(f, dict)
        ]
        first = t["frames"][0] if frames and isinstance(t.get("frames"), list) else None
        if pid is not None and isinstance(first, dict) and isinstance(first.get("filename"), str):
            name, file, line = frames[0][:3]
            if line is not None and wants_code(Frame(name, file, line)):
                code = code_line(pid, first["filename"], line)
                frames[0] = (name, file, line, code)
        tid = int(t.get("os_thread_id") or t.get("thread_id") or 0)
        name = str(t.get("thread_name") or "?")
        threads.append(thread_stack(tid, name, bool(t.get("active", False)), frames))
    return threads


WORKER_LOOP = ("_worker_loop", "data/_utils/worker.py")
"""torch's DataLoader worker: every worker's main thread runs in it."""
SPAWN_WRAP = ("_wrap", "torch/multiprocessing/spawn.py")
"""What ``torch.multiprocessing.spawn`` (and ``start_processes``) runs in each process it
starts: the function given to it, a rank's training."""


BOOTSTRAP = ("_bootstrap", "multiprocessing/process.py")
"""Where a multiprocessing child starts: frames outside it are its forking parent's."""


def stack_role(threads: list[ThreadStack] | tuple[ThreadStack, ...]) -> str | None:
    """What a process's stacks say it is: a DataLoader worker, a rank, or nothing yet (still
    starting up, or neither). Frames are read innermost first up to multiprocessing's
    ``_bootstrap``: a forked child still carries its parent's frames (a rank's ``_wrap``)
    below it."""
    for t in threads:
        for f in t.frames:
            if f.name == WORKER_LOOP[0] and f.file.endswith(WORKER_LOOP[1]):
                return WORKER
            if f.name == SPAWN_WRAP[0] and f.file.endswith(SPAWN_WRAP[1]):
                return RANK
            if f.name == BOOTSTRAP[0] and f.file.endswith(BOOTSTRAP[1]):
                break
    return None


class PySpy:
    """Runs py-spy; ``dump`` never raises."""

    def __init__(self, binary: str | None = None, timeout: float = DUMP_TIMEOUT_S) -> None:
        self.binary = binary or find_py_spy()
        self.timeout = timeout
        self.env = {k: v for k, v in os.environ.items() if k != "RUST_BACKTRACE"}

    def dump(
        self, pid: int, blocking: bool = False, native: bool = False
    ) -> tuple[list[ThreadStack] | None, str | None]:
        if self.binary is None:
            return None, NO_PY_SPY
        cmd = [self.binary, "dump", "--pid", str(pid), "--json"]
        if native:
            cmd.append("--native")  # implies pausing the target: only on explicit request
        elif not blocking:
            cmd.append("--nonblocking")
        try:
            out = subprocess.run(
                cmd, capture_output=True, text=True, timeout=self.timeout, env=self.env
            )
        except subprocess.TimeoutExpired:
            return None, explain("", None, pid)
        except OSError as e:
            return None, f"cannot run py-spy ({e.strerror}): reinstall py-spy"
        if out.returncode != 0:
            return None, explain(out.stderr, out.returncode, pid)
        try:
            return parse_dump(out.stdout, pid), None
        except (ValueError, TypeError):
            return None, f"py-spy printed something that is not its JSON for pid {pid}"

    def dump_for_keeps(
        self, pid: int, native: bool = False
    ) -> tuple[list[ThreadStack] | None, str | None, str]:
        """One process's stacks for a dump a user asked for: (threads, error, note). A
        nonblocking read races the running interpreter and can fail ("Failed to get stack
        traces", about one in 80 on a busy machine); after a second try, one blocking dump
        pauses the process for a few ms (0.4 ms at 1 thread, 2.3 ms at 31: docs/facts/capture.md,
        "py-spy's cost"), acceptable once. The live view does not retry: it backs off instead.
        ``native``: with the C/C++ frames (the process paused while read: a hang's dump);
        where py-spy cannot, the Python frames, and the note says why."""
        if native:
            threads, error = self.dump(pid, native=True)
            if not error:
                return threads, None, "with native frames"
            if "(ptrace)" in error or start_ticks(pid) is None:
                return threads, error, ""
            fallback = f"no native frames ({error})"
            threads, error, note = self.dump_for_keeps(pid)
            return threads, error, "; ".join(n for n in (fallback, note) if n)
        threads, error = self.dump(pid)
        for blocking in (False, True):
            if not error or "(ptrace)" in error or start_ticks(pid) is None:
                break
            time.sleep(0.2)  # a worker caught mid-fork, a slow moment
            threads, error = self.dump(pid, blocking=blocking)
            if not error and blocking:
                return threads, None, "read while paused (nonblocking reads failed)"
        return threads, error, ""


AGENT_STALE_S = 3 * STACKS_PERIOD_S
"""An agent's last stacks older than this are stale: its samples stopped (something holds the
GIL, or it went away), and py-spy reads the process instead."""


class AgentStacks(NamedTuple):
    """One process's stacks as its agent sampled them (``AgentLink.stacks``)."""

    t: float
    """When they arrived, on the monitor's clock."""
    threads: tuple[ThreadStack, ...]


class StackSource:
    """The target tree's stacks: from each process's agent while its samples arrive, else from
    py-spy within a CPU budget (``StackBudget``: ranks first, workers in turn, a process that
    just went still more often); a process not read this tick keeps its last read."""

    def __init__(
        self,
        pid: int,
        spy: PySpy | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        proc_root: str = "/proc",
        hints: Callable[[], Mapping[int, RoleHint]] | None = None,
        identity: TargetId | None = None,
        tree: ProcTree | None = None,
        agent_stacks: Callable[[], Mapping[int, AgentStacks]] | None = None,
        budget: StackBudget | None = None,
    ) -> None:
        """``hints``: role evidence from elsewhere (``AgentLink.hints``), beside the stacks'
        own (``stack_role``). ``identity``: the target as attached; once it is not alive the
        tree is empty (a later process with its PID is never sampled). ``tree``: the walk of
        /proc shared with the other sources. ``agent_stacks``: the agents' own samples
        (``AgentLink.stacks``). ``budget``: py-spy's CPU budget; None reads every main process
        and rank at each tick and one worker in turn (tests, a one-off dump)."""
        self.pid = pid
        self.identity = identity
        self.spy = spy or PySpy()
        self._clock = clock
        self._wall = wall
        self._tree = tree or ProcTree(pid, proc_root, clock, identity)
        self._proc = proc_root
        self._ends_seen: dict[
            tuple[int, str], tuple[float, tuple[int, ...] | None, SocketPeer | None]
        ] = {}
        """(pid, kernel wait) -> (when, writers, peer) last looked up (``_ends``)."""
        self._agent_stacks = agent_stacks
        self.budget = budget
        self._failures: dict[int, tuple[int, float, str]] = {}
        """pid -> (consecutive failures, retry after, last error)."""
        self._last: dict[int, ProcessStacks] = {}
        self._still: dict[int, int] = {}
        """pid -> reads in a row that found its stacks unchanged."""
        self._waited: dict[int, float] = {}
        """pid -> when a read last found one of its threads waiting for data."""
        self._agented: set[int] = set()
        """Processes whose agent has sent stacks: when they stop, py-spy looks at once."""
        self._next_worker = 0
        self._hints = hints
        self._seen: dict[tuple[int, int], RoleHint] = {}
        """(pid, start) -> what its stacks said it is: a worker or a rank stays one."""
        self._start: dict[int, int] = {}
        self._parent: dict[int, int] = {}
        self._ranks: dict[int, RankId | None] = {}
        self._numbered: dict[int, int] = {}
        """pid -> rank number, for the ranks that have one (a child's rank above it)."""

    def tree(self) -> list[tuple[int, str]]:
        """(pid, role) of the target and every process below it, roles by ``roles`` from
        /proc, the stacks seen so far and the hints; none once the target has exited."""
        facts = self._tree.facts()
        if not facts:
            self._start, self._seen, self._ranks, self._parent = {}, {}, {}, {}
            return []
        self._start = {f.pid: f.start_ticks for f in facts}
        self._parent = {f.pid: f.ppid for f in facts}
        keys = {(f.pid, f.start_ticks) for f in facts}
        self._seen = {k: v for k, v in self._seen.items() if k in keys}
        given = self._hints() if self._hints else {}
        settled = roles(facts, self.pid, merge_hints(self.hints(), given))
        self._ranks = {pid: rank for pid, (_, rank) in settled.items()}
        self._numbered = {p: r.rank for p, r in self._ranks.items() if r and r.rank is not None}
        return [(f.pid, settled[f.pid][0]) for f in facts]

    def hints(self) -> dict[int, RoleHint]:
        """pid -> what its stacks said it is (``stack_role``), for the processes alive at the
        last walk: the host source's evidence for the same roles."""
        seen = dict(self._seen)  # one C-level copy: another source's thread may ask
        return {pid: hint for (pid, _), hint in seen.items()}

    def sample(self) -> StacksSample:
        now = self._clock()
        tree = self.tree()
        if not tree and self.identity is not None and not self.identity.alive():
            self._last.clear()
            return StacksSample(self.pid, now, self._wall(), (), problem=self.identity.gone())
        alive = {pid for pid, _ in tree}
        roles = dict(tree)
        agents = self._agent_stacks() if self._agent_stacks else {}
        rest = []
        for pid, role in tree:
            got = agents.get(pid)
            if got is not None and now - got.t <= AGENT_STALE_S:
                self._agented.add(pid)
                self._read(pid, role, got.threads, None, None, AGENT, got.t)
            else:
                rest.append((pid, role))
        for pid in [p for p in self._agented if p not in alive]:
            self._agented.discard(pid)
        problem = None
        if rest and self.spy.binary is None:
            problem = NO_PY_SPY
        elif rest:
            launchers = {self._parent.get(pid) for pid, role in tree if role == RANK}
            for pid in self._due(rest, now, launchers):
                self._dump(pid, roles[pid], now)
        for pid in list(self._last):
            if pid not in alive:
                del self._last[pid]  # exited between dumps: forgotten quietly
                self._still.pop(pid, None)
                self._waited.pop(pid, None)
        procs = tuple(self._last[pid] for pid, _ in tree if pid in self._last)
        return StacksSample(self.pid, now, self._wall(), procs, problem=problem)

    def _due(
        self, tree: list[tuple[int, str]], now: float, launchers: set[int | None]
    ) -> list[int]:
        """The processes py-spy reads now: by the budget, or (none) every main process and
        rank and one worker in turn. Processes backing off after failures wait.
        ``launchers``: the parents of ranks."""
        ready = [(pid, role) for pid, role in tree if now >= self._failures.get(pid, (0, 0.0))[1]]
        if self.budget is None:
            workers = [pid for pid, role in ready if role == WORKER]
            due = [pid for pid, role in ready if role != WORKER]
            if workers:  # one DataLoader worker per tick, in turn: a lower rate for each
                self._next_worker %= len(workers)
                due.append(workers[self._next_worker])
                self._next_worker += 1
            return due
        candidates = []
        for pid, role in ready:
            last = self._last.get(pid)
            candidates.append(
                Candidate(
                    pid=pid,
                    role=role,
                    parent=self._parent.get(pid, 0),
                    still=self._still.get(pid, 0),
                    last_read=last.taken if last is not None else None,
                    agent_stalled=pid in self._agented,
                    parent_waits=self._waits(self._parent.get(pid, 0), now),
                    launcher=pid in launchers and role != RANK,
                )
            )
        return self.budget.due(now, candidates)

    def _waits(self, pid: int, now: float) -> bool:
        """``pid`` waited for data lately, or has not been read yet (nothing says it does not)."""
        if pid not in self._last:
            return True
        return now - self._waited.get(pid, float("-inf")) <= WAITED_LATELY_S

    def _read(
        self,
        pid: int,
        role: str,
        threads: tuple[ThreadStack, ...],
        error: str | None,
        took: float | None,
        via: str,
        taken: float,
    ) -> None:
        """A new read of ``pid`` (or the same agent sample again: nothing changes)."""
        last = self._last.get(pid)
        if last is not None and last.via == via and last.taken == taken:
            return
        rank = self._ranks.get(pid)
        number = rank.rank if rank is not None else None
        if error is None and last is not None and not last.error:
            same = tuple(t.frames for t in threads) == tuple(t.frames for t in last.threads)
            self._still[pid] = self._still.get(pid, 0) + 1 if same else 0
        of_rank = rank_above(pid, self._parent, self._numbered) if role == CHILD else None
        threads = self._kernel_waits(pid, threads)
        self._last[pid] = ProcessStacks(
            pid, role, threads, error, took, number, via, taken, of_rank
        )
        if any(t.phase == DATA_WAIT for t in threads):
            self._waited[pid] = taken
        if error is None:
            seen = stack_role(threads)
            key = (pid, self._start.get(pid, -1))
            if seen == WORKER or (seen == RANK and key not in self._seen):
                self._seen[key] = RoleHint(seen)  # a worker is never a rank again

    def _kernel_waits(self, pid: int, threads: tuple[ThreadStack, ...]) -> tuple[ThreadStack, ...]:
        """Each parked thread of a process whose stacks stood still since its last read, with
        the call the kernel says it waits in (at most KERNEL_ASKED of them): a lock's futex, a
        pipe's or socket's read. A process that moved is not read at all (a training loop
        pays nothing); who could end a pipe or socket read (scans of the tree's open files) is
        looked up once it has stood still for PARKED_READS reads, and kept for ENDS_KEPT_S: a
        rank that waits in the same collective at every read pays for it once in a while."""
        still = self._still.get(pid, 0)
        if still < 1:
            return threads
        asked, out = 0, []
        now = self._clock()
        for t in threads:
            if not t.active and t.tid and asked < KERNEL_ASKED:
                asked += 1
                waits = waits_in(pid, t.tid, self._proc)
                ends = self._ends(pid, waits, now) if still >= PARKED_READS else (None, None)
                t = replace(t, waits=waits, writers=ends[0], peer=ends[1])
            out.append(t)
        return tuple(out)

    def _ends(
        self, pid: int, waits: str, now: float
    ) -> tuple[tuple[int, ...] | None, SocketPeer | None]:
        """(a pipe's writers, a TCP socket's peer) for a read ``waits`` names, from the last
        ENDS_KEPT_S when looked up then."""
        target, inode = pipe_read(waits), socket_read(waits)
        if target is None and inode is None:
            return None, None
        kept = self._ends_seen.get((pid, waits))
        if kept is not None and 0 <= now - kept[0] < ENDS_KEPT_S:
            return kept[1], kept[2]
        tree = sorted(self._parent)
        writers = pipe_writers(target, tree, self._proc) if target is not None else None
        peer = socket_peer(pid, inode, tree, self._proc) if inode is not None else None
        if len(self._ends_seen) >= ENDS_KEPT_MAX:
            self._ends_seen.clear()
        self._ends_seen[(pid, waits)] = (now, writers, peer)
        return writers, peer

    def _dump(self, pid: int, role: str, now: float) -> None:
        fails = self._failures.get(pid, (0, 0.0, ""))[0]
        t0 = time.monotonic()
        cpu0 = _children_cpu()
        threads, error = self.spy.dump(pid)
        took = time.monotonic() - t0
        if self.budget is not None:
            self.budget.spent(_children_cpu() - cpu0)
        if error is None and threads is not None:
            self._failures.pop(pid, None)
            self._read(pid, role, tuple(threads), None, took, PY_SPY, now)
            return
        if error and "has exited" in error:
            self._last.pop(pid, None)
            return
        if error and NOT_PYTHON in error and not runs_python(pid, self._proc):
            # a `sleep`, a shell, a compiled tool: no Python stacks, and nothing wrong
            self._failures[pid] = (fails + 1, now + BACKOFF_MAX_S, error)
            self._read(pid, role, (), None, took, PY_SPY, now)
            return
        fails += 1
        backoff = min(BACKOFF_MAX_S, 2.0**fails)
        self._failures[pid] = (fails, now + backoff, error or "")
        self._read(pid, role, (), error, took, PY_SPY, now)

    def dump_all(self) -> list[tuple[int, str, list[ThreadStack] | None, str | None]]:
        """Every process of the tree now (the full-dump key): (pid, role, threads, error).
        Nonblocking reads that fail are tried again (``PySpy.dump_for_keeps``)."""
        out = []
        for pid, role in self.tree():
            threads, error, _ = self.spy.dump_for_keeps(pid)
            out.append((pid, role, threads, error))
        return out


def _children_cpu() -> float:
    """CPU seconds of this process's children it has waited for: a py-spy run's cost."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
