"""The target's process tree, walked once for every source that needs it.

The host source, the stack sampler and the agent link each need the processes below the
target. Walking /proc costs a stat per process and a ``children`` read per thread (an 8-rank
job with 8 DataLoader workers each is ~70 processes and ~300 threads): three sources walking it
every second was most of the tree's cost. One ``ProcTree`` walks it at most every ``max_age``
seconds, whoever asks first, and hands the same facts to the others; what is fixed at exec
(command line, launcher variables) is read once per process (``procfs.tree_facts``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gputop.model.roles import DATALOADER_WORKER, ProcFacts
from gputop.sources.procfs import tree_facts
from gputop.sources.target import TargetId

WALK_S = 3.0
"""The tree is walked again after this long: a new DataLoader worker or rank is seen within it."""
FULL_WALK_S = 15.0
"""Children are found from each process's main thread at every walk, and from all its threads
(a ``children`` file each: most of a walk's reads, 4 of every 5 on a job of 4-thread processes)
only this often, as are a DataLoader worker's (a worker is rarely a parent): a process started
from another thread or by a worker is seen within it."""


class ProcTree:
    """``facts()`` is the tree as of the last walk (walked again when older than ``max_age``)."""

    def __init__(
        self,
        pid: int,
        proc_root: str = "/proc",
        clock: Callable[[], float] = time.monotonic,
        identity: TargetId | None = None,
    ) -> None:
        """``identity``: the target as attached; once it is not alive the tree is empty (a
        later process given its PID is never walked)."""
        self.pid = pid
        self.identity = identity
        self._proc = proc_root
        self._clock = clock
        self._lock = threading.Lock()
        self._facts: tuple[ProcFacts, ...] = ()
        self._by_key: dict[tuple[int, int], ProcFacts] = {}
        self._at: float | None = None
        self._full_at: float | None = None
        self.walks = 0
        """Walks made so far (what tests and the scale bench count)."""

    def facts(self, max_age: float = WALK_S) -> tuple[ProcFacts, ...]:
        """Parents before children; empty once the target has exited."""
        with self._lock:  # sources on other threads wait for the walk rather than repeat it
            if self.identity is not None and not self.identity.alive():
                self._facts, self._by_key = (), {}  # at once: its PID may be another's now
                return self._facts
            now = self._clock()
            if self._at is None or now - self._at >= max_age or now < self._at:
                self._walk(now)
            return self._facts

    def pids(self, max_age: float = WALK_S) -> list[int]:
        return [f.pid for f in self.facts(max_age)]

    def agent_pids(self, max_age: float = WALK_S) -> list[int]:
        """The processes that may serve an agent: not DataLoader workers by torch's name for
        them (the agent turns itself off in a worker), so 64 workers of an 8-rank job are not
        looked for at every tick."""
        return [f.pid for f in self.facts(max_age) if not f.comm.startswith(DATALOADER_WORKER)]

    def _walk(self, now: float) -> None:
        self._at = now
        self.walks += 1
        full = self._full_at is None or not 0 <= now - self._full_at < FULL_WALK_S
        if full:
            self._full_at = now
        facts = tree_facts(self.pid, self._proc, self._by_key, main_only=not full)
        self._facts = tuple(facts)
        self._by_key = {(f.pid, f.start_ticks): f for f in facts}
