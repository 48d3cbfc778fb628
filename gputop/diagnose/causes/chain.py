"""Follow a wait from process to process to its root. A hang's first link names who the stuck
process waits for (the writer of its pipe, the peer of its socket, the holder of its lock, its
child); that process may itself wait, and so on. Each process of the job has at most one edge
out, read from what gputop already measures of it: a file lock it waits for
(``HostSample.lock_waits``), a pipe it reads and who else holds its write end
(``ThreadStack.writers``), a socket it reads and the job's process at the other end
(``ThreadStack.peer``), a child it waits for (``wait4``, its children by parent pid). The
chain ends at a process that runs (busy), one asleep with no edge (idle), one outside the job
or gone, or one already on the chain (a deadlock: every link is named). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.shown import printable
from gputop.model.stacks import pipe_read

MAX_LINKS = 6
"""Links followed at most: a chain longer than this is said as far as it goes."""
BUSY = 0.1
"""Cores from which the process a chain ends at runs (works, slowly or in a loop)."""


@dataclass(frozen=True)
class Link:
    """One edge: ``pid`` waits for ``next``, as ``says`` puts it."""

    pid: int
    says: str
    """"waits for a FLOCK file lock on /data/x held by", "waits to read pipe:[123] from"."""
    next: int | None
    """The process it waits for; None: outside the job (or no process holds the other end)."""
    end: str = ""
    """Who it waits for when that is no process of the job: "pid 300 (...), outside the job,
    which keeps it"."""
    lever: str = ""
    """What to do when the chain ends at this link (a holder outside the job to end)."""


def _label(sig: RuleInputs, pid: int, short: bool = False) -> str:
    """ "rank 1 (pid 42)", else "pid 42 (its command line)" (``short``: without it)."""
    procs = sig.host.process_cpu if sig.host is not None else ()
    p = next((p for p in procs if p.pid == pid), None)
    if p is not None and p.rank is not None:
        return f"rank {p.rank} (pid {pid})"
    if short:
        return f"pid {pid}"
    cmd = f" ({printable(p.cmdline, 48)})" if p is not None and p.cmdline else ""
    return f"pid {pid}{cmd}"


def edge(sig: RuleInputs, pid: int) -> Link | None:
    """What process ``pid`` waits for, None when it waits for nothing gputop can name."""
    for w in sig.host.lock_waits if sig.host is not None else ():
        if w.waiter == pid:
            on = f" on {w.path}" if w.path else ""
            says = f"waits for a {w.kind} file lock{on} held by"
            if w.holder_in_job:
                return Link(pid, says, w.holder)
            cmd = f" ({printable(w.holder_cmd, 48)})" if w.holder_cmd else ""
            who = f"pid {w.holder}{cmd}" if w.holder is not None else "an open file description"
            fix = (f"end or fix pid {w.holder}{cmd}: it holds the lock{on} and does not release "
                   "it" if w.holder is not None else "")  # fmt: skip
            return Link(pid, says, None, f"{who}, outside the job, which keeps it", fix)
    threads = sig.stacks.threads_of(pid) if sig.stacks is not None else ()
    for t in threads:
        if t.writers is not None and pipe_read(t.waits):
            others = [w for w in t.writers if w != pid]
            says = f"waits to read {pipe_read(t.waits)} from"
            if others:
                return Link(pid, says, others[0])
            return Link(pid, says, None, "no process: its writer is gone")
        if t.peer is not None and t.peer.pid != pid:
            address = printable(t.peer.address, 48)
            says = f"waits for an answer over {t.peer.transport} ({address}) from"
            if t.peer.pid is not None:
                return Link(pid, says, t.peer.pid)
            where = "another host" if not t.peer.on_host else "a process outside the job"
            return Link(pid, says, None, f"{where}, which sends nothing")
        if t.waits.startswith("wait4"):
            procs = sig.host.process_cpu if sig.host is not None else ()
            kid = next((p.pid for p in procs if p.ppid == pid), None)
            if kid is not None:
                return Link(pid, "waits for its child", kid)
    return None


def _root(sig: RuleInputs, pid: int) -> str:
    """How the chain ends at a process with no edge out."""
    procs = sig.host.process_cpu if sig.host is not None else ()
    p = next((p for p in procs if p.pid == pid), None)
    if p is None:
        return f"pid {pid} is gone"
    if p.cores is not None and p.cores >= BUSY:
        return f"{_label(sig, pid)} runs, {p.cores:.0%} of a core: it works but sends nothing"
    threads = sig.stacks.threads_of(pid) if sig.stacks is not None else ()
    main = next((t for t in threads if t.name == "MainThread"), None)
    leaf = main.frames[0] if main is not None and main.frames else None
    where = f" in {leaf.name} ({leaf.file}:{leaf.line})" if leaf is not None else ""
    waits = f", {main.waits}" if main is not None and main.waits else ""
    return f"{_label(sig, pid)} sleeps{where}{waits}: nothing it waits for is named"


def follow(sig: RuleInputs, start: int, before: tuple[int, ...] = ()) -> tuple[list[Link], str]:
    """The links from ``start`` (a process the stuck one waits for) to the root, and how it
    ends: a process that runs, one asleep, one outside the job, or a cycle (``before``: the
    processes already on the chain, the stuck one first)."""
    links: list[Link] = []
    seen = [*before, start]
    pid = start
    while len(links) < MAX_LINKS:
        link = edge(sig, pid)
        if link is None:
            return links, _root(sig, pid)
        links.append(link)
        if link.next is None:  # the link says its own end
            return links, ""
        if link.next in seen:
            cycle = seen[seen.index(link.next) :]
            named = " -> ".join(_label(sig, p, short=True) for p in (*cycle, link.next))
            return links, f"a deadlock: {named}"
        seen.append(link.next)
        pid = link.next
    return links, "the chain goes on"


DEADLOCK = (
    "a deadline on one of the waits (a read with select's timeout, a lock with a timeout): "
    "two processes that wait for each other never end by themselves"
)


def chain(sig: RuleInputs, start: int, stuck: int | None = None) -> tuple[str, tuple[str, ...]]:
    """("; pid 200 waits for a FLOCK file lock on /x held by pid 300 ...", the levers for its
    root): what follows a first link to ``start`` ("" when ``start`` waits for nothing
    named). ``stuck``: the process the first link is from (a chain back to it is a deadlock)."""
    links, end = follow(sig, start, (stuck,) if stuck is not None else ())
    if not links:
        return "", ()
    parts = []
    for x in links:
        to = _label(sig, x.next) if x.next is not None else x.end
        parts.append(f"{_label(sig, x.pid)} {x.says} {to}")
    levers = (links[-1].lever,) if links[-1].lever else ()
    if end.startswith("a deadlock"):
        levers = (DEADLOCK,)
    return "; " + "; ".join((*parts, end) if end else parts), levers
