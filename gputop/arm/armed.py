"""Armed captures: the triggers read from each evaluated state (``arm/triggers``), the rate
limits (``arm/limits``), the capture that fits each event started on a worker thread through
``capture.take`` (the path the keys and `gputop capture` take), and the capture root kept
within its disk budget (``capture/listing.prune``: the oldest armed captures first, never one
taken by hand).

What fits each event (``plan``):
- a hang: a py-spy dump of every process of the job with native frames, at once and again
  HANG_AGAIN_S later (what moved), the verdict's wait-for chain, lock and socket tables in the
  manifest;
- a straggler, a regression, a new principal: a torch.profiler trace of TRACE_STEPS steps on
  the rank it is about and a typical one where the agent runs (py-spy record of the tree for
  FLAME_S where it does not), and an nsys window where the job runs under nsys;
- a memory risk: a CUDA memory snapshot where the job's torch has CUDA.

Each capture's manifest holds the trigger, why, the verdict and budget at that moment, the
steps before it and (at its end) after it, and what the capture costs the job. The loop that
evaluates calls ``consider`` with each state and prints or records what ``drain`` returns.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gputop.arm.limits import RateLimit
from gputop.arm.moved import moved
from gputop.arm.triggers import WARMUP_S, Fired, TriggerWatch
from gputop.capture.folder import CaptureError
from gputop.capture.listing import prune
from gputop.capture.take import Bounds
from gputop.capture.take import take as take_one
from gputop.diagnose import Verdict
from gputop.model.steps import AgentsSample, StepRecord
from gputop.render.armed import event_text
from gputop.session import SessionState
from gputop.vocab.arm import HANG, MEMORY, REGRESSION, STRAGGLING, VERDICT

BUDGET_BYTES = 4 << 30
"""The capture root's size past which the oldest armed captures are removed (``--arm-budget``)."""
HANG_AGAIN_S = 30.0
TRACE_STEPS = 3
FLAME_S = 10.0
HELD_ONCE = "; the next ones are not said until it may fire again"
AFTER_WAIT_S = 5.0
"""How long a capture's thread waits for the steps after it (a hung job has none)."""
STEPS_KEPT = 16
"""Steps of each rank the manifest keeps before the trigger and after it."""
OVERHEAD = {
    "pyspy-dump": "py-spy reads each process's memory from outside: no pause",
    "pyspy-dump-native": "each process paused while py-spy unwinds its native frames "
    "(milliseconds each)",
    "pyspy-flame": "py-spy samples from outside at its rate: no pause, a few % of one core for "
    "gputop",
    "torch-trace": "torch.profiler on the traced ranks for the traced steps (those steps run "
    "slower, typically 5-30%; the first trace in a process also starts the profiler, about a "
    "second in its warm-up step)",
    "memory-snapshot": "the CUDA allocator records each allocation's stack for the steps captured",
    "nsys": "Nsight Systems' collection for the window (a few % on the job's GPU work)",
}
"""What each capture costs the job, said in its manifest."""


@dataclass(frozen=True)
class Step:
    """One capture of a plan: its kind, options, the ranks it is about, when after the event."""

    kind: str
    options: Mapping[str, bool]
    only: frozenset[int] | None = None
    delay_s: float = 0.0
    seconds: float | None = None
    steps: int | None = None


@dataclass(frozen=True)
class ArmEvent:
    """One thing armed captures did: fired, held back, started, ended (a line each)."""

    t: float
    trigger: str
    what: str
    """fired, held back, started, ok, partial, failed, ..."""
    why: str
    kind: str = ""
    folder: str = ""

    def doc(self) -> dict[str, Any]:
        """As a session event (its own time beside it) and, with ``t_s``, in ``diagnose
        --json``'s ``armed``."""
        return {k: v for k, v in asdict(self).items() if k != "t"}

    def line(self) -> str:
        """How the event is said on a terminal or in a log."""
        return event_text(self.doc())


def plan(f: Fired, has_agent: bool, has_cuda: bool, nsys: bool) -> list[Step]:
    """The captures that fit ``f`` for this job (module docstring); [] when none does."""
    if f.trigger == HANG:
        native = {"native": True}
        return [Step("pyspy-dump", native), Step("pyspy-dump", native, delay_s=HANG_AGAIN_S)]
    if f.trigger in (STRAGGLING, REGRESSION, VERDICT):
        ranks = frozenset(p for p in (f.pid, f.typical) if p is not None) or None
        out = [
            Step("torch-trace", {}, ranks, steps=TRACE_STEPS)
            if has_agent
            else Step("pyspy-flame", {}, seconds=FLAME_S)
        ]
        if nsys:
            out.append(Step("nsys", {}, seconds=FLAME_S))
        return out
    if f.trigger == MEMORY and has_cuda and has_agent:
        return [Step("memory-snapshot", {}, steps=TRACE_STEPS)]
    return []


def no_plan_reason(f: Fired) -> str:
    if f.trigger == MEMORY:
        return "no capture fits: a CUDA memory snapshot needs the agent and torch with CUDA"
    return "no capture fits this job"


Take = Callable[..., tuple[Any, Path]]
"""``capture.take.take``'s shape (a fake in tests)."""


class Armed:
    """Armed captures for one target (module docstring). ``consider`` and ``drain`` are called
    by the loop that evaluates; captures run on their own threads."""

    def __init__(
        self,
        pid: int,
        root: Path,
        triggers: frozenset[str],
        *,
        warmup_s: float = WARMUP_S,
        budget_bytes: int = BUDGET_BYTES,
        limits: RateLimit | None = None,
        take: Take | None = None,
        age: Callable[[], float | None] | None = None,
        nsys: Callable[[], bool] = lambda: False,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
        start: Callable[[Callable[[], None], str], object] | None = None,
        after_wait_s: float = AFTER_WAIT_S,
    ) -> None:
        """``clock``: the session's (a capture's start and end are stamped with it; a fire
        with its evaluation's time)."""
        self.pid = pid
        self.root = root
        self.watch = TriggerWatch(triggers, warmup_s)
        self.limits = limits if limits is not None else RateLimit()
        self.budget_bytes = budget_bytes
        self._take = take
        self._age = age if age is not None else _age_of(pid)
        self._nsys = nsys
        self._wall = wall
        self._clock = clock
        self._start = start if start is not None else _thread
        self.after_wait_s = after_wait_s
        self._events: queue.SimpleQueue[ArmEvent] = queue.SimpleQueue()
        self._agents: AgentsSample | None = None
        """The latest agents' reading (read by the capture threads for the steps after)."""
        self.cancel = threading.Event()
        self._running = 0
        self._lock = threading.Lock()
        self._first_dump: dict[float, Path] = {}
        """A hang's first dump by its fire time: the second says what moved since."""
        self._quiet: dict[str, int] = {}
        """Trigger -> fires held back since it last fired (the first one said)."""

    @property
    def running(self) -> int:
        with self._lock:
            return self._running

    def consider(self, state: SessionState) -> None:
        """Read one state: each trigger that fires is held back by the limits or starts the
        captures that fit it."""
        self._agents = state.agents
        fired = self.watch.check(state, self._age())
        for f in fired:
            held = self.limits.allow(f.trigger, f.t)
            if held is not None:
                if f.trigger not in self._quiet:  # said once until it may fire again
                    self._emit(ArmEvent(f.t, f.trigger, "held back", held + HELD_ONCE))
                self._quiet[f.trigger] = self._quiet.get(f.trigger, 0) + 1
                continue
            again = self._quiet.pop(f.trigger, 0)
            agents = state.agents.agents if state.agents is not None else ()
            connected = [a for a in agents if a.state == "connected"]
            has_cuda = any(a.fingerprint.get("cuda") for a in connected)
            steps = plan(f, bool(connected), has_cuda, self._nsys())
            count = f"; held back {again} times since the last" if again > 1 else ""
            self._emit(ArmEvent(f.t, f.trigger, "fired", f.why + count))
            if not steps:
                self._emit(ArmEvent(f.t, f.trigger, "no capture", no_plan_reason(f)))
                continue
            at = self._clock()  # the evaluation's point may be a reading's time before it
            context = {**_context(f, state, self._wall()), "fired_mono_s": round(at, 6)}
            for step in steps:
                self._launch(f, step, context, round(at * 1e9))

    def drain(self) -> list[ArmEvent]:
        """The events since the last call, oldest first."""
        out = []
        while True:
            try:
                out.append(self._events.get_nowait())
            except queue.Empty:
                return out

    def close(self, wait_s: float = 0.0) -> None:
        """Cancel what still runs (a bounded capture keeps what it has), waiting up to
        ``wait_s`` for the threads to write their manifests."""
        self.cancel.set()
        deadline = time.monotonic() + wait_s
        while self.running and time.monotonic() < deadline:
            time.sleep(0.05)  # pacing: the capture threads end on the cancel event

    def _await_steps(self, end_ns: int) -> None:
        """On a capture's thread, once it ended: until the agents' readings hold a step that
        began after it (the loop hands them to ``consider``), AFTER_WAIT_S at most, so the
        manifest's steps after the event reach past the capture."""
        if self._agents is None or not any(a.steps for a in self._agents.agents):
            return  # no agent: no steps to wait for
        deadline = time.monotonic() + self.after_wait_s
        while not _began_after(self._agents, end_ns) and time.monotonic() < deadline:
            if self.cancel.wait(0.1):  # pacing: readings come every half second or so
                return

    def _emit(self, e: ArmEvent) -> None:
        self._events.put(e)

    def _launch(self, f: Fired, step: Step, context: dict[str, Any], since_ns: int) -> None:
        with self._lock:
            self._running += 1

        def work() -> None:
            try:
                self._capture(f, step, context, since_ns)
            finally:
                with self._lock:
                    self._running -= 1

        self._start(work, f"armed-{f.trigger}-{step.kind}")

    def _capture(self, f: Fired, step: Step, context: dict[str, Any], since_ns: int) -> None:
        """On a worker thread: the capture to its end, the root kept within its budget."""
        take = self._take or take_one
        if step.delay_s and self.cancel.wait(step.delay_s):
            return
        overhead = OVERHEAD["pyspy-dump-native" if step.options.get("native") else step.kind]
        trigger = {**context, "overhead": overhead, "after_s": step.delay_s}

        here: list[Path] = []
        first = self._first_dump.get(f.t) if step.delay_s else None

        def after() -> dict[str, Any]:
            if f.trigger != HANG:  # a hung job makes no steps to wait for
                self._await_steps(round(self._clock() * 1e9))
            added: dict[str, Any] = {"steps_after": _steps_after(self._agents, since_ns)}
            if first is not None and here:  # a hang's second dump: what moved since the first
                added["moved_since_first"] = moved(first, here[0])
                self._first_dump.pop(f.t, None)
            return added

        def started(folder: Path) -> None:
            here.append(folder)
            if step.kind == "pyspy-dump" and not step.delay_s:
                self._first_dump[f.t] = folder
            self._emit(ArmEvent(self._clock(), f.trigger, "started", "", step.kind, str(folder)))

        try:
            m, folder = take(step.kind, self.pid, self.root, Bounds(step.seconds, None, None,
                             step.steps), self.cancel, started=started,
                             options=dict(step.options), trigger=trigger, after=after,
                             only=step.only)  # fmt: skip
            now = self._clock()
            self._emit(ArmEvent(now, f.trigger, m.status, m.reason, step.kind, str(folder)))
            removed = prune(self.root, self.budget_bytes, keep=frozenset({folder.name}))
            for k in removed:
                self._emit(ArmEvent(now, k.trigger or "", "removed", f"the capture root is over "
                                    f"its {self.budget_bytes >> 20} MiB budget", k.kind or "",
                                    str(self.root / k.name)))  # fmt: skip
        except CaptureError as e:
            self._emit(ArmEvent(self._clock(), f.trigger, "failed", str(e), step.kind))
        except Exception as e:  # an armed capture must never take the monitor down
            why = f"{type(e).__name__}: {e}"
            self._emit(ArmEvent(self._clock(), f.trigger, "failed", why, step.kind))


def _began_after(agents: AgentsSample | None, t_ns: int) -> bool:
    return any(s.t0_ns >= t_ns for a in (agents.agents if agents else ()) for s in a.steps[-4:])


def _thread(work: Callable[[], None], name: str) -> object:
    t = threading.Thread(target=work, name=name, daemon=True)
    t.start()
    return t


def _age_of(pid: int) -> Callable[[], float | None]:
    """Seconds since ``pid`` started: its start read from /proc once, then the boot-time clock
    (the one /proc's start times count on) against it; None when it cannot be read."""
    from gputop.sources.procfs import start_ticks

    ticks = start_ticks(pid)
    if ticks is None:
        return lambda: None
    started = ticks / os.sysconf("SC_CLK_TCK")
    return lambda: max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)


def _context(f: Fired, state: SessionState, wall: float) -> dict[str, Any]:
    """What the manifest says about the moment the trigger fired."""
    return {
        "trigger": f.trigger,
        "why": f.why,
        "fired_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall))
        + f".{int(wall % 1 * 1000):03d}Z",
        "ranks": [p for p in (f.pid, f.typical) if p is not None],
        "verdict": _verdict_doc(state.verdict),
        "budget": _budget_doc(state.verdict),
        "lock_waits": [asdict(w) for w in (state.host.lock_waits if state.host else ())][:32],
        "sockets": _sockets(state),
        "steps_before": _steps_doc(state.agents),
    }


def _verdict_doc(v: Verdict | None) -> dict[str, Any] | None:
    if v is None:
        return None
    p = v.principal
    return {
        "principal": p.bound if p is not None else None,
        "summary": p.summary if p is not None else v.note,
        "evidence": [e.text for e in p.evidence] if p is not None else [],
        "cause": p.cause.text if p is not None and p.cause is not None else None,
        "cause_evidence": [e.text for e in p.cause.evidence]
        if p is not None and p.cause is not None
        else [],
        "secondary": [f.bound for f in v.secondary],
        "risks": list(v.risks),
    }


def _budget_doc(v: Verdict | None) -> dict[str, float] | None:
    if v is None or v.budget is None:
        return None
    return {s.name: round(s.share, 4) for s in v.budget.slices}


def _sockets(state: SessionState) -> list[dict[str, Any]]:
    """Each thread of the job that reads a socket, and the other end (a hang's table)."""
    out: list[dict[str, Any]] = []
    for proc in state.stacks.processes if state.stacks is not None else ():
        for t in proc.threads:
            peer = t.peer
            if peer is not None and len(out) < 64:
                out.append({"pid": proc.pid, "thread": t.name, "transport": peer.transport,
                            "address": peer.address, "peer_pid": peer.pid})  # fmt: skip
    return out


def _steps_doc(agents: AgentsSample | None) -> list[dict[str, Any]]:
    """Each agent's last STEPS_KEPT steps (``_step``)."""
    return [
        {"pid": a.pid, "rank": a.rank, "steps": [_step(s) for s in a.steps[-STEPS_KEPT:]]}
        for a in (agents.agents if agents is not None else ())
    ]


def _step(s: StepRecord) -> list[float]:
    """[step, milliseconds, start]: the start on the host's monotonic clock in seconds (the
    agents' and the live session's: ``fired_mono_s`` is on it)."""
    return [s.step, round(s.dur_ns / 1e6, 3), round(s.t0_ns / 1e9, 6)]


def _steps_after(agents: AgentsSample | None, since_ns: int) -> list[dict[str, Any]]:
    """Each agent's first STEPS_KEPT steps that started after the trigger fired (the session's
    clock is the host's monotonic one, as the agents' steps)."""
    out = []
    for a in agents.agents if agents is not None else ():
        after = [s for s in a.steps if s.t0_ns >= since_ns][:STEPS_KEPT]
        out.append({"pid": a.pid, "rank": a.rank, "steps": [_step(s) for s in after]})
    return out
