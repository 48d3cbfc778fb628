"""What a hung thread waits for, told by the other threads of its process (the last stack
dump): a wait that only another thread can end (a queue, an event, a lock, a socket whose
other end is a thread) ends never when that thread is gone, or parked itself. Two threads each
waiting for a lock, nothing running, is a lock-order deadlock. A DataLoader's main process
waits for batches that parked workers will never make. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.rules.common import at, frame_name
from gputop.diagnose.rules.progress import stuck
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.stack_stats import Stillness, user_frame, waits_in
from gputop.model.stacks import FUTEX, ThreadStack
from gputop.vocab import stacks as stack

PARKED = frozenset({stack.LOCK_WAIT, stack.BLOCKED, stack.IDLE})
"""Phases of a thread that does nothing: it waits, or sleeps."""
IN_PROCESS_WAITS = frozenset({"threading.py", "queue.py"})
"""Files whose waits (Condition.wait, Event.wait, Queue.get, Lock.acquire) only another
thread of the same process ends."""
AGENT_THREADS = "gputop-"
"""Threads gputop's agent starts are named so: never the job's own."""
MAX_NAMED = 2
"""Other threads named in the cause line (the evidence lists them all)."""

ORDER = (
    "take the locks in one order everywhere (or hold one lock for both), so no thread waits "
    "for a lock while holding the other's"
)
DUMP = (
    "py-spy dump --pid {pid} --locals shows each thread's variables; faulthandler."
    "dump_traceback_later(600, repeat=True) prints every thread's stack when a step hangs"
)
SENTINEL = (
    "make the thread that feeds it put its exception (or a sentinel) in a finally: and wait with "
    "a timeout (queue.get(timeout=...), event.wait(timeout), lock.acquire(timeout=...)) that "
    "checks it is alive (thread.is_alive())"
)
RELEASE = (
    "take the lock with `with lock:` (or release it in a finally:) so a thread that raises or "
    "returns cannot keep it; threading.RLock where one thread takes it twice"
)
TIMEOUT = (
    "a timeout on the wait (queue.get(timeout=...), event.wait(timeout), "
    "lock.acquire(timeout=...), sock.settimeout(...)): a wait that never ends becomes an error"
)
WORKER_TIMEOUT = (
    "DataLoader(timeout=...) makes a batch that never comes an error, and a timeout on the "
    "workers' own wait (event.wait(timeout), a download's deadline) names the shard"
)


def _own(threads: Sequence[ThreadStack]) -> list[ThreadStack]:
    """The job's threads: not gputop's agent's, not one being started or ended."""
    return [
        t
        for t in threads
        if not t.name.startswith(AGENT_THREADS)
        and not (t.phase == stack.IDLE and all(f.file.endswith("threading.py") for f in t.frames))
    ]


def _where(t: ThreadStack) -> str:
    """'label_server in Event.wait at train.py:20': the wait its own code called, and where."""
    leaf, caller = waits_in(t), user_frame(t.frames)
    if leaf is None:
        return f"{t.name} ({t.phase})"
    if caller is None or caller == leaf:
        return f"{t.name} at {at(leaf)}"
    return f"{t.name} in {frame_name(leaf)} at {at(caller)}"


def _kernel(t: ThreadStack | None) -> str:
    if t is None or not t.waits:
        return ""
    return "a lock (futex)" if t.waits == FUTEX else t.waits


def _waits(m: Stillness, t: ThreadStack | None) -> str:
    """'waits at train.py:47 on a lock (futex)', 'waits in Queue.get at train.py:38'."""
    kernel = _kernel(t)
    if m.leaf is None:
        return f"waits in {kernel or m.phase}"
    if m.caller is None or m.caller == m.leaf:  # its own line waits: a C call
        return f"waits at {at(m.leaf)} on {kernel}" if kernel else f"waits at {at(m.leaf)}"
    return f"waits in {frame_name(m.leaf)} at {at(m.caller)}"


def _on_lock(t: ThreadStack) -> bool:
    """Parked acquiring a lock: the phase says so, or the kernel says futex while the thread's
    own line (not a Condition's, an Event's or a Queue's wait) is where it sleeps."""
    leaf = t.deciding or (t.frames[0] if t.frames else None)
    own_line = leaf is not None and leaf.file.rsplit("/", 1)[-1] not in IN_PROCESS_WAITS
    return t.phase == stack.LOCK_WAIT or (t.waits == FUTEX and own_line)


def _in_process(m: Stillness, t: ThreadStack | None) -> bool:
    """A wait only another thread of the process ends: a lock, a condition, an event, a
    queue.Queue (not a socket, a pipe, a child)."""
    leaf = m.leaf.file.rsplit("/", 1)[-1] if m.leaf is not None else ""
    return (t is not None and t.waits == FUTEX) or leaf in IN_PROCESS_WAITS


def _workers(sig: RuleInputs, m: Stillness) -> Cause | None:
    """The main process waits for a batch and every DataLoader worker is parked."""
    sk = sig.stacks
    if sk is None or m.phase != stack.DATA_WAIT or not sk.workers_at:
        return None
    parked = []
    for pid, leaf, caller in sk.workers_at:  # quiet: the hang rule found the whole tree so
        if leaf is None:
            return None
        parked.append((pid, leaf, caller))
    pid, leaf, caller = parked[0]
    place = f" at {at(caller)}" if caller is not None and caller != leaf else ""
    n = len(parked)
    every = f"every DataLoader worker ({n})" if n > 1 else "its only DataLoader worker"
    text = f"{every} waits in {frame_name(leaf)}{place}: none makes a batch, so {m.label} waits"
    evidence = tuple(
        Evidence(f"worker pid {p} parked in {frame_name(lf)}{f' at {at(c)}' if c else ''}",
                 "stacks")
        for p, lf, c in parked
    )  # fmt: skip
    return Cause(text, evidence, (WORKER_TIMEOUT, DUMP.format(pid=pid)))


def threads_cause(sig: RuleInputs) -> Cause | None:
    """The stuck thread (the rank outside the collective the others wait in, else the first
    parked main thread) told by its process's other threads; None without stacks."""
    sk = sig.stacks
    m = stuck(sk)
    if sk is None or m is None or m.phase in (stack.COLLECTIVE_WAIT, stack.BACKWARD):
        return None
    workers = _workers(sig, m)
    if workers is not None:
        return workers
    threads = sk.threads_of(m.pid)
    return _census(m, threads) if threads else None


def _census(m: Stillness, threads: tuple[ThreadStack, ...]) -> Cause | None:
    own = _own(threads)
    main = next((t for t in own if t.name == "MainThread"), own[0] if own else None)
    others = [t for t in own if t is not main]
    if any(t.phase not in PARKED for t in others):
        return None  # another thread runs: it may yet end the wait (and the CPU says so)
    evidence = tuple(
        Evidence(f"pid {m.pid}'s thread {_where(t)} ({_kernel(t) or t.phase})", "stacks")
        for t in others
    )
    who, waits = m.label, _waits(m, main)
    if not others:
        if not _in_process(m, main):
            return None  # a socket, a pipe, a child: another process ends it, not a thread
        alone = (Evidence(f"pid {m.pid} has one thread of its own: {m.phase}", "stacks"),)
        if main is not None and _on_lock(main):
            text = (
                f"{who} {waits} that no thread of its process will release: the thread that "
                "took it has ended without releasing it (or this thread took it before)"
            )
            return Cause(text, alone, (RELEASE, DUMP.format(pid=m.pid)))
        text = (
            f"{who} {waits} and no other thread of its process is left to end the wait: the "
            "thread that would (a producer, a helper) has ended"
        )
        return Cause(text, alone, (SENTINEL, DUMP.format(pid=m.pid)))
    locked = [t for t in others if _on_lock(t)]
    if main is not None and _on_lock(main) and locked:
        text = (
            f"a lock-order deadlock in {who}: its main thread {waits} while {_where(locked[0])} "
            "waits for another lock, and no thread runs"
        )
        return Cause(text, evidence, (ORDER, DUMP.format(pid=m.pid)))
    named = "; ".join(_where(t) for t in others[:MAX_NAMED])
    more = f" and {len(others) - MAX_NAMED} more" if len(others) > MAX_NAMED else ""
    text = f"{who} {waits}, and the threads that could end it are parked too: {named}{more}"
    return Cause(text, evidence, (DUMP.format(pid=m.pid), TIMEOUT))
