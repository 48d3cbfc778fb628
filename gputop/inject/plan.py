"""The plan (what will be done to which process, what it needs, and every refusal with what to
do about it, one line each) and the load itself, with a bounded wait for the agents' sockets.

The job needs nothing installed: each process gets a private copy of the monitor's own agent
in its own file system (``agent_copy.place_for``), which removes itself once loaded; a copy
that failed says why in its folder, gputop reads that line and removes the folder. A copy is
left only for a main thread still inside a C call when the wait ends (it loads, and removes
itself, when the call returns).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gputop.inject import debugger as dbg
from gputop.inject import remote
from gputop.inject.agent_copy import SCRIPT, AgentCopy, CopyError, load_code, place_for
from gputop.inject.target import (
    InjectTarget,
    is_ancestor_of,
    is_python,
    own_ptrace_cap,
    ptrace_refusal,
    read_process,
    remote_debug_disabled,
    yama_scope,
)
from gputop.model.roles import CHILD, DATALOADER_WORKER, RANK, WORKER
from gputop.sources.agent_link import WITHOUT_AGENT
from gputop.sources.agent_sockets import own_pid, root_of
from gputop.sources.procfs import descendants

MIN_VERSION = (3, 10)
"""The oldest Python gputop's agent runs on: the oldest current torch supports (pyproject's
requires-python; CI checks the agent's code for it with vermin)."""
REMOTE_EXEC = (3, 14)
WAIT_S = 10.0
"""How long the load waits for the agents' sockets (a main thread in Python runs the call at
once; one inside a long C call runs it when the call returns)."""


@dataclass(frozen=True)
class ProcessLoad:
    """One process's part of the plan: how the agent gets in, or why it does not."""

    pid: int
    target: InjectTarget | None
    method: str | None = None
    """"remote_exec", "gdb" or "lldb"."""
    refusal: str | None = None
    """One line with what to do (None: it can be done)."""
    has_agent: bool = False
    python: bool = True
    """False for a process that is not Python (nothing to load, nothing to say)."""

    @property
    def todo(self) -> bool:
        return self.method is not None and self.refusal is None and not self.has_agent


@dataclass(frozen=True)
class LoadPlan:
    """What loading the agent into a process tree will do and need, before anything is done."""

    pid: int
    processes: tuple[ProcessLoad, ...]
    debugger: tuple[str, str] | None

    @property
    def todo(self) -> tuple[ProcessLoad, ...]:
        return tuple(p for p in self.processes if p.todo)

    @property
    def refusals(self) -> tuple[str, ...]:
        return tuple(p.refusal for p in self.processes if p.refusal)

    @property
    def nothing_to_do(self) -> bool:
        """Every Python process of the tree has an agent (or there is none)."""
        return not self.todo and all(p.has_agent or not p.python for p in self.processes)

    def lines(self) -> list[str]:
        """What will be done, what it needs, and the refusals: one line each."""
        out: list[str] = []
        for p in self.processes:
            if p.has_agent:
                out.append(f"pid {p.pid} already has gputop's agent: nothing to do")
            elif p.refusal:
                out.append(f"pid {p.pid}: {p.refusal}")
            elif p.todo and p.target is not None:
                out.append(f"{p.target.label}: {how(p.method)}")
        if self.todo:
            out.append(
                "needs: the same user or root, and ptrace allowed; nothing installed in the "
                "job's environment: a private copy of gputop's agent (standard library only) "
                "goes into its own /tmp and is removed once loaded; the job is not restarted, "
                "and if anything fails it keeps training"
            )
        return out

    def summary(self) -> str:
        """The plan in one line (the status line, the start of a headless run)."""
        if self.nothing_to_do:
            if not any(p.python for p in self.processes):
                return "not a Python process: there is no agent to load"
            return "the agent is already loaded: nothing to do"
        if not self.todo:
            return self.refusals[0] if self.refusals else "no Python process to load the agent into"
        pids = ", ".join(str(p.pid) for p in self.todo)
        methods = sorted({p.method or "" for p in self.todo})
        return f"load gputop's agent into pid {pids} through {' and '.join(methods)}"


def how(method: str | None) -> str:
    if method == "remote_exec":
        return (
            "sys.remote_exec (PEP 768) runs a script that loads the copy of gputop's agent and "
            "starts it on the main thread at its next safe point"
        )
    return (
        f"{method} stops it for a moment, queues a pending call that loads the copy of "
        "gputop's agent and starts it (the main thread runs it at its next safe point), and "
        "detaches"
    )


def _roles(pid: int, proc: str) -> dict[int, str]:
    """DataLoader workers when no host source said: by torch's name for them, or as a forked
    copy of its parent (the same command line: the loader's default start method)."""

    def read(path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return None

    out = {}
    for child in descendants(pid, proc):
        comm, cmdline, stat = (read(f"{proc}/{child}/{n}") for n in ("comm", "cmdline", "stat"))
        if comm is None or stat is None:
            continue
        ppid = stat[stat.rindex(b")") + 2 :].split()[1].decode()
        forked = cmdline is not None and cmdline == read(f"{proc}/{ppid}/cmdline")
        out[child] = WORKER if comm.startswith(DATALOADER_WORKER.encode()) or forked else CHILD
    return out


def candidates(pid: int, roles: Mapping[int, str] | None, proc: str = "/proc") -> list[int]:
    """The target and the processes below it that train, by the host source's roles: its ranks
    when it knows them (a launcher's helpers, such as multiprocessing's resource tracker, are
    left alone), else every one that is not a DataLoader worker (a rank not yet recognised)."""
    roles = _roles(pid, proc) if roles is None else roles
    below = [p for p in descendants(pid, proc) if p != pid]
    if any(roles.get(p) == RANK for p in below):
        return [pid, *(p for p in below if roles.get(p) == RANK)]
    return [pid, *(p for p in below if roles.get(p, CHILD) != WORKER)]


NO_DEBUGGER = (
    "no debugger to load the agent with: apt-get install gdb (or your system's package of gdb "
    "or lldb)"
)


def choose_method(
    version: tuple[int, int] | None,
    environ: Mapping[str, str],
    flags: tuple[str, ...],
    debugger: tuple[str, str] | None,
) -> str | None:
    """sys.remote_exec on 3.14+ unless the target opted out; else the debugger; else None."""
    if version is not None and version >= REMOTE_EXEC and not remote_debug_disabled(environ, flags):
        return "remote_exec"
    return debugger[0] if debugger is not None else None


def plan_process(pid: int, debugger: tuple[str, str] | None, proc: str = "/proc") -> ProcessLoad:
    t = read_process(pid, proc)
    if t is None:
        return ProcessLoad(pid, None, refusal="it has exited")
    euid = os.geteuid()
    cap = own_ptrace_cap(proc) if euid == 0 else False
    why = ptrace_refusal(
        t.uid, pid, euid, yama_scope(proc), cap, is_ancestor_of(os.getpid(), pid, proc)
    )
    if why:
        return ProcessLoad(pid, t, refusal=why)
    if not t.exe:
        return ProcessLoad(pid, t, refusal=(
            f"cannot read /proc/{pid}/exe: run gputop as the job's user or as root"))  # fmt: skip
    if not is_python(t.exe):
        return ProcessLoad(pid, t, refusal=f"not a Python process ({t.exe})", python=False)
    if t.has_agent():
        return ProcessLoad(pid, t, has_agent=True)
    if t.version is not None and t.version < MIN_VERSION:
        v = ".".join(map(str, t.version))
        return ProcessLoad(pid, t, refusal=f"Python {v}: gputop's agent needs 3.10 or newer")
    if t.state == "T":
        return ProcessLoad(pid, t, refusal=f"it is stopped: resume it first (kill -CONT {pid})")
    if t.environ.get("GPUTOP_DISABLE", "") not in ("", "0"):
        return ProcessLoad(pid, t, refusal="GPUTOP_DISABLE is set in its environment: the "
                           "agent would stay off; restart it without")  # fmt: skip
    method = choose_method(t.version, t.environ, t.flags, debugger)
    if method is None:
        return ProcessLoad(pid, t, refusal=NO_DEBUGGER)
    return ProcessLoad(pid, t, method)


def plan_load(
    pid: int,
    roles: Mapping[int, str] | None = None,
    path: str | None = None,
    proc: str = "/proc",
) -> LoadPlan:
    """The plan for ``pid`` and the ranks below it; reads /proc only. ``path`` is the PATH the
    debugger is looked up in (default: this process's)."""
    debugger = dbg.find_debugger(path)
    processes = []
    for p in candidates(pid, roles, proc):
        if p != pid:
            t = read_process(p, proc)
            if t is None or not t.exe or not is_python(t.exe):
                continue  # a non-Python child (a shell, a compiler) is nobody's concern here
        processes.append(plan_process(p, debugger, proc))
    return LoadPlan(pid, tuple(processes), debugger)


@dataclass(frozen=True)
class LoadReport:
    """What the load did, per process, as lines; ``line`` is the one the status line shows."""

    loaded: tuple[int, ...]
    problems: tuple[str, ...]
    waiting: tuple[str, ...] = ()
    """Processes whose call is queued but whose main thread has not run Python since."""

    @property
    def ok(self) -> bool:
        return bool(self.loaded) and not self.problems and not self.waiting

    def line(self) -> str:
        parts = []
        if self.loaded:
            parts.append(f"agent loaded into pid {', '.join(map(str, self.loaded))}")
        parts += self.waiting
        parts += self.problems
        return "; ".join(parts) or "nothing was loaded"


def load_agent(
    plan: LoadPlan,
    wait_s: float = WAIT_S,
    progress: Callable[[str], None] | None = None,
    proc: str = "/proc",
) -> LoadReport:
    """Do the plan: each process in turn (its copy written, the call queued), then wait
    (bounded) for the agents' sockets. Never raises for the target's or the tools' failures;
    the target keeps running on every path."""
    say = progress or (lambda _line: None)
    # the plan's refusals too: the result line is the whole story (the screen shows only it)
    problems = [f"pid {p.pid}: {p.refusal}" for p in plan.processes if p.refusal and p.python]
    queued: dict[int, _Queued] = {}
    for p in plan.todo:
        assert p.target is not None
        say(f"loading the agent into pid {p.pid} ({p.method})")
        try:
            copy = place_for(p.pid, p.target.uid, p.target.gid, dict(p.target.environ), proc)
        except CopyError as e:
            problems.append(f"pid {p.pid}: {e}")
            continue
        why = _queue(plan, p, copy, say, proc)
        if isinstance(why, _Queued):
            queued[p.pid] = why
        else:
            problems.append(f"pid {p.pid}: {why}")
            copy.remove()
            copy.close()
    return _wait(queued, problems, wait_s)


@dataclass(frozen=True)
class _Queued:
    target: InjectTarget
    copy: AgentCopy
    c_call: str | None
    """The C function the main thread was in (the debugger saw it), if outside Python."""


def _queue(
    plan: LoadPlan, p: ProcessLoad, copy: AgentCopy, say: Callable[[str], None], proc: str
) -> _Queued | str:
    """Ask ``p``'s main thread to load ``copy``: queued, or why not (one line)."""
    t = p.target
    assert t is not None
    root = root_of(p.pid, proc)
    if p.method == "remote_exec":
        own = own_pid(p.pid, proc)
        r = remote.run_remote_exec(t.path, p.pid, f"{copy.folder}/{SCRIPT}",
                                   own if root else None)  # fmt: skip
        if r.scheduled:
            return _Queued(t, copy, None)
        if not (r.refused and plan.debugger is not None):
            return r.problem or "sys.remote_exec failed"
        say(f"pid {p.pid} refuses remote execution: trying {plan.debugger[0]}")
    assert plan.debugger is not None
    run = dbg.run_debugger(plan.debugger, p.pid, load_code(copy.folder, copy.package), root or None)
    if run.queued:
        return _Queued(t, copy, dbg.in_c_call(run.main_in))
    return run.problem or "the debugger failed"


def _wait(queued: dict[int, _Queued], problems: list[str], wait_s: float) -> LoadReport:
    """Until every queued process serves its agent, says why it could not, or ``wait_s``."""
    loaded: list[int] = []
    deadline = time.monotonic() + wait_s
    pending = dict(queued)
    while pending:
        for pid, q in list(pending.items()):
            if q.target.has_agent():
                loaded.append(pid)
            elif None in (failed := q.copy.failures()):
                problems.append(f"pid {pid}: the agent did not start ({failed[None]}): "
                                f"{WITHOUT_AGENT}")  # fmt: skip
            else:
                continue
            del pending[pid]
            q.copy.remove()
            q.copy.close()
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    waiting: list[str] = []
    for pid, q in pending.items():
        if not os.path.exists(f"/proc/{pid}"):
            problems.append(f"pid {pid} exited")
            q.copy.remove()
        elif q.c_call:
            waiting.append(
                f"pid {pid}'s main thread is inside a C call ({q.c_call}): the agent starts "
                "when it returns to Python"
            )  # its copy stays until then: it removes itself once loaded
        else:
            q.copy.remove()  # nothing stays on disk; a late safe point finds none
            waiting.append(
                f"pid {pid}: no agent socket after {wait_s:g} s (a main thread inside a long C "
                "call runs no Python; its stderr says why if the agent failed): try again"
            )
        q.copy.close()
    return LoadReport(tuple(sorted(loaded)), tuple(problems), tuple(waiting))
