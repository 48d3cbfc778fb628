"""What a hung job waits for, and who holds it: a process of the job blocked on a file lock is
named with the lock's holder (its pid and command line, whether it belongs to the job) and the
file, from /proc/locks (``sources/locks.py``; `lslocks` reads the same). A leftover helper
that kept a lock is the classic case: the stack shows only `flock`, the holder is elsewhere.
Pure."""

from __future__ import annotations

from gputop.diagnose.causes.chain import chain
from gputop.diagnose.causes.pipes import pipe_cause
from gputop.diagnose.causes.sockets import socket_cause
from gputop.diagnose.causes.threads import threads_cause
from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.rules.progress import stuck
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.model.host import LockWait
from gputop.model.shown import printable
from gputop.vocab import budget as slices

SLICE = slices.STALL

LOCK_TIMEOUT = (
    "take the lock with a deadline (fcntl.flock(fd, LOCK_EX | LOCK_NB) in a retry loop, or "
    "filelock's timeout=): a lock never released becomes an error, not a hang"
)


def _who(sig: RuleInputs, pid: int) -> str:
    procs = sig.host.process_cpu if sig.host is not None else ()
    rank = next((p.rank for p in procs if p.pid == pid), None)
    return f"rank {rank} (pid {pid})" if rank is not None else f"pid {pid}"


def _holder(w: LockWait) -> str:
    if w.holder is None:
        return "an open file description (no pid: an OFD lock)"
    cmd = f" ({w.holder_cmd})" if w.holder_cmd else ""
    return f"pid {w.holder}{cmd}, {'of the job' if w.holder_in_job else 'outside the job'}"


def _on(w: LockWait) -> str:
    return f" on {w.path}" if w.path else ""


CHILD_TIMEOUT = (
    "a timeout on the wait (subprocess.run(..., timeout=...), Popen.wait(timeout=...)): a "
    "child that never ends becomes an error with a traceback"
)
CHILD_BUSY = 0.05
"""A child using this much of a core works; under it, it waits (a sleep, a read, a lock)."""
SUBPROCESS_FILE = "subprocess.py"
"""The standard library's file a thread waiting for its child sits in (Popen.wait,
communicate)."""


def _child_wait(sig: RuleInputs) -> Cause | None:
    """A process of the job parked in subprocess's wait, and the child it waits for: its
    command line and whether it uses CPU (asleep for good, or working slowly)."""
    still = sig.stacks.still if sig.stacks is not None else ()
    procs = sig.host.process_cpu if sig.host is not None else ()
    for m in still:
        if m.leaf is None or not m.leaf.file.endswith(SUBPROCESS_FILE):
            continue
        kids = [p for p in procs if p.ppid == m.pid]
        if not kids:
            continue
        kid = max(kids, key=lambda p: p.cores or 0.0)
        busy = kid.cores or 0.0
        doing = (
            f"using {busy:.0%} of a core: it works, slowly"
            if busy >= CHILD_BUSY
            else "using no CPU: it waits itself"
        )
        cmd = f" ({printable(kid.cmdline, 80)})" if kid.cmdline else ""
        text = f"{_who(sig, m.pid)} waits for its child pid {kid.pid}{cmd}, {doing}"
        further, root = chain(sig, kid.pid, m.pid)  # what the child waits for, to the root
        text += further
        said = f"{_who(sig, m.pid)} in {m.leaf.name} for {m.still_s:.0f} s; pid {kid.pid} "
        evidence = (Evidence(f"{said}{kid.cores or 0.0:.2f} cores", "stacks"),)
        look = f"py-spy dump --pid {kid.pid} (a Python child) or its own log: why pid {kid.pid} "
        return Cause(text, evidence, (*root, f"{look}does not end", CHILD_TIMEOUT))
    return None


def find(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """What the stuck job waits for (no budget slice sizes a hang)."""
    return hung_cause(sig)


def hung_cause(sig: RuleInputs) -> Cause | None:
    """A file-lock wait of the job's processes with the lock's holder, else a pipe read with
    its writers, a TCP read with its peer, a wait for a child process, or the stuck thread told
    by the other threads of its process; None when none is measured."""
    waits = sig.host.lock_waits if sig.host is not None else ()
    m = stuck(sig.stacks)
    own = [w for w in waits if m is None or w.waiter == m.pid]
    if not own:  # the stuck process's own wait first: a chain from it reaches any lock
        found = pipe_cause(sig) or socket_cause(sig) or _child_wait(sig)
        if found is not None or not waits:
            return found or threads_cause(sig)
    return _lock_cause(sig, own or list(waits))


def _lock_cause(sig: RuleInputs, waits: list[LockWait]) -> Cause:
    """The first lock wait with its holder, and what the holder waits for when it is of the
    job; every wait as evidence."""
    w = waits[0]
    what = f"a {w.kind} lock on {w.path}" if w.path else f"a {w.kind} file lock"
    text = f"{_who(sig, w.waiter)} waits for {what} held by {_holder(w)}"
    root: tuple[str, ...] = ()
    if w.holder is not None and w.holder_in_job:  # what the holder waits for, to the root
        further, root = chain(sig, w.holder, w.waiter)
        text += further
    evidence = tuple(
        Evidence(f"/proc/locks: {_who(sig, x.waiter)} waits for the {x.kind} lock of "
                 f"{_holder(x)}{_on(x)}", "host")
        for x in waits
    )  # fmt: skip
    levers = list(root)
    if w.holder is not None:
        levers.append(
            f"end or fix pid {w.holder}{f' ({w.holder_cmd})' if w.holder_cmd else ''}: it "
            "holds the lock and does not release it"
        )
    levers.append(LOCK_TIMEOUT)
    return Cause(text, evidence, tuple(levers))
