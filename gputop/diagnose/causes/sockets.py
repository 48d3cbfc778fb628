"""What a hung thread reading a TCP or Unix socket waits for: the other end
(``ThreadStack.peer``, from /proc/PID/net/tcp or sock_diag, and the job's open files). A peer
that is a process of the job is named with its command line and CPU (alive, but it sends
nothing); one on this host outside the job, or on another host, by its address. Pure."""

from __future__ import annotations

from gputop.diagnose.causes.chain import chain
from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.rules.common import at, frame_name
from gputop.diagnose.rules.progress import stuck
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.shown import printable
from gputop.model.stack_stats import Stillness
from gputop.model.stacks import ThreadStack

SOCKET_TIMEOUT = (
    "sock.settimeout(...) (or a deadline on the request): a peer that never answers becomes "
    "an error with a traceback, not a hang"
)


def _reader(sig: RuleInputs, m: Stillness) -> ThreadStack | None:
    threads = sig.stacks.threads_of(m.pid) if sig.stacks is not None else ()
    return next((t for t in threads if t.peer is not None), None)


def socket_cause(sig: RuleInputs) -> Cause | None:
    """The stuck thread's socket read and its peer; None when it reads no socket whose other
    end is known."""
    m = stuck(sig.stacks)
    t = _reader(sig, m) if m is not None else None
    if m is None or t is None or t.peer is None or t.peer.pid == m.pid:
        return None  # its own process holds the other end: its threads say why (threads.py)
    peer = t.peer
    leaf = t.deciding or (t.frames[0] if t.frames else None)
    where = f" at {at(leaf)} in {frame_name(leaf)}" if leaf is not None else ""
    said = Evidence(f"{m.label}'s {t.name} sleeps in {t.waits}{where}", "stacks")
    address = printable(peer.address, 64)
    unix = peer.transport == "Unix"
    over = f"a Unix socket ({address})" if unix else f"TCP ({address})"
    if peer.pid is not None:
        procs = sig.host.process_cpu if sig.host is not None else ()
        p = next((p for p in procs if p.pid == peer.pid), None)
        cmd = f" ({printable(p.cmdline, 60)})" if p is not None and p.cmdline else ""
        use = f", using {p.cores:.0%} of a core" if p is not None and p.cores is not None else ""
        text = (
            f"{m.label} waits for an answer from pid {peer.pid}{cmd} over {over}{use}: "
            "it sends nothing"
        )
        further, root = chain(sig, peer.pid, m.pid)  # what the peer waits for, to the root
        look = f"py-spy dump --pid {peer.pid} (a Python peer) or its log: why it does not answer"
        held = Evidence(f"the other end, {address}, is held by pid {peer.pid}", "stacks")
        return Cause(text + further, (said, held), (*root, look, SOCKET_TIMEOUT))
    if unix:
        text = (
            f"{m.label} waits for an answer over {over} from a process outside the job: it "
            "sends nothing"
        )
        look = f"ss -xp names the process at the other end of {address}; its log"
    elif peer.on_host:
        text = (
            f"{m.label} waits for an answer over TCP from {address}, a process on this host "
            "outside the job: it sends nothing"
        )
        look = f"ss -tp '( sport = :{address.rsplit(':', 1)[-1]} )' names the process; its log"
    else:
        text = (
            f"{m.label} waits for an answer over TCP from {address} (another host): nothing comes"
        )
        look = f"the service at {address}: is it up, and does it answer (its log, a health check)"
    return Cause(text, (said,), (look, SOCKET_TIMEOUT))
