"""What a hung thread reading a pipe or FIFO waits for: the processes that hold its write end
(``ThreadStack.writers``, from /proc/PID/fd and fdinfo). A read ends when a writer writes or
when every write end closes; a writer that died while the reader kept a write end of its own
(the classic missing `os.close(w)` after starting the child, or any multiprocessing queue,
which keeps both ends in every process) leaves a read that never ends. Pure."""

from __future__ import annotations

from gputop.diagnose.causes.chain import chain
from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.rules.common import at, frame_name
from gputop.diagnose.rules.progress import stuck
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.shown import printable
from gputop.model.stack_stats import Stillness
from gputop.model.stacks import ThreadStack, pipe_read

CLOSE_WRITE_END = (
    "close the pipe's write end in the reader once the writer has it (os.close(w) after "
    "Popen(..., pass_fds=(w,)) or fork): a writer that dies then ends the read with EOF"
)
READ_DEADLINE = (
    "read with a deadline (select.select([r], [], [], timeout)) and check the writer between "
    "tries (Popen.poll(), Process.is_alive())"
)
QUEUE_DEADLINE = (
    "queue.get(timeout=...) in a loop that checks the producer (process.is_alive()): a "
    "multiprocessing queue keeps a write end in every process, so its reader never sees EOF"
)
MULTIPROCESSING = "multiprocessing/"
"""Frames of a multiprocessing queue or connection: the reader holds a write end by design."""


def _reader(sig: RuleInputs, m: Stillness) -> ThreadStack | None:
    threads = sig.stacks.threads_of(m.pid) if sig.stacks is not None else ()
    return next((t for t in threads if t.writers is not None and pipe_read(t.waits)), None)


def pipe_cause(sig: RuleInputs) -> Cause | None:
    """The stuck thread's pipe read and its writers; None when it reads no pipe."""
    m = stuck(sig.stacks)
    t = _reader(sig, m) if m is not None else None
    if m is None or t is None or t.writers is None:
        return None
    target = printable(pipe_read(t.waits) or "", 80)
    leaf = t.deciding or (t.frames[0] if t.frames else None)
    where = f" at {at(leaf)} in {frame_name(leaf)}" if leaf is not None else ""
    said = Evidence(f"{m.label}'s {t.name} sleeps in {t.waits}{where}", "stacks")
    others = [w for w in t.writers if w != m.pid]
    queue = any(MULTIPROCESSING in f.file for f in t.frames)
    if not others:
        keeps = m.pid in t.writers
        text = (
            f"{m.label} waits to read {target} and no other process holds its write end: the "
            f"writer has exited{', and the reader keeps a write end itself' if keeps else ''}, "
            "so the read never ends"
        )
        held = f"write end held by: {'itself only' if keeps else 'no process of the job'}"
        levers = (QUEUE_DEADLINE,) if queue else (CLOSE_WRITE_END, READ_DEADLINE)
        return Cause(text, (said, Evidence(held, "stacks")), levers)
    procs = sig.host.process_cpu if sig.host is not None else ()
    first = next((p for p in procs if p.pid == others[0]), None)
    cmd = f" ({printable(first.cmdline, 60)})" if first is not None and first.cmdline else ""
    use = (
        f", using {first.cores:.0%} of a core"
        if first is not None and first.cores is not None
        else ""
    )
    text = f"{m.label} waits to read {target} from pid {others[0]}{cmd}{use}: it writes nothing"
    further, root = chain(sig, others[0], m.pid)  # what that process waits for, to the root
    look = f"py-spy dump --pid {others[0]} (a Python writer) or its log: why it writes nothing"
    holders = Evidence(f"write end held by pid {', '.join(map(str, others))}", "stacks")
    return Cause(text + further, (said, holders),
                 (*root, look, QUEUE_DEADLINE if queue else READ_DEADLINE))  # fmt: skip
