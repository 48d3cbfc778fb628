"""What a hung job waits for, and who holds it: a process of the job blocked on a file lock is
named with the lock's holder (its pid and command line, whether it belongs to the job) and the
file, from /proc/locks (``sources/locks.py``; `lslocks` reads the same). A leftover helper
that kept a lock is the classic case: the stack shows only `flock`, the holder is elsewhere.
Pure."""

from __future__ import annotations

from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.signals import RuleInputs
from gputop.model.host import LockWait

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


def hung_cause(sig: RuleInputs) -> Cause | None:
    """The first file-lock wait of the job's processes, or None when none waits on one."""
    waits = sig.host.lock_waits if sig.host is not None else ()
    if not waits:
        return None
    w = waits[0]
    what = f"a {w.kind} lock on {w.path}" if w.path else f"a {w.kind} file lock"
    text = f"{_who(sig, w.waiter)} waits for {what} held by {_holder(w)}"
    evidence = tuple(
        Evidence(f"/proc/locks: {_who(sig, x.waiter)} waits for the {x.kind} lock of "
                 f"{_holder(x)}{_on(x)}", "host")
        for x in waits
    )  # fmt: skip
    levers = []
    if w.holder is not None:
        levers.append(
            f"end or fix pid {w.holder}{f' ({w.holder_cmd})' if w.holder_cmd else ''}: it "
            "holds the lock and does not release it"
        )
    levers.append(LOCK_TIMEOUT)
    return Cause(text, evidence, tuple(levers))
