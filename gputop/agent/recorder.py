"""The in-process hot path: phase markers and step boundaries, into preallocated memory.

Rules that everything here keeps (the training loop calls it thousands of times a second):
no system call, no lock, no I/O, nothing that can block; an internal error is counted and
swallowed, never raised into the user's code, and the user's own exceptions pass through
(``__exit__`` returns False). A daemon thread (server.py) reads the finished steps.

Garbage collections are timed by a ``gc.callbacks`` hook ("start"/"stop"): it costs nothing
between collections, a few hundred nanoseconds per collection, and two subtractions per step.
A collection holds the GIL, so whichever thread runs it, the training thread stalls with it.
"""

from __future__ import annotations

import collections
import gc
import time
from collections.abc import Callable
from typing import Any, Literal

from ..vocab.steps import STEP_PHASES
from .in_flight import InFlight

_now = time.perf_counter_ns  # CLOCK_MONOTONIC on Linux: one timebase for every rank on a node

STANDARD_PHASES = STEP_PHASES
"""The phases every recorder knows by index (``gputop.vocab.steps``, shared with the monitor)."""
BACKWARD_ID = STANDARD_PHASES.index("backward")
MAX_PHASES = 64
"""Custom phase names beyond this many are counted as ``other``."""
STEP_HISTORY = 512
"""Finished steps kept in memory: what a monitor attaching late receives."""
GPU_PENDING_MAX = 2048
"""CUDA event pairs waiting to complete; beyond this, new pairs are dropped and counted."""


class Phase:
    """A reusable ``with`` marker for one phase. Prebuilt per name: entering allocates nothing.

    Not re-entrant for the *same* phase object (a phase inside itself); different phases nest,
    and time is exclusive: while an inner phase is open the outer one does not count, so a
    step's phases never add up to more than the step.
    """

    __slots__ = ("_ev", "_prev_id", "_prev_t0", "_rec", "_t0", "id", "name")

    def __init__(self, recorder: StepRecorder, phase_id: int, name: str) -> None:
        self._rec = recorder
        self.id = phase_id
        self.name = name
        self._t0 = 0
        self._prev_id = -1
        self._prev_t0 = 0
        self._ev: Any = None

    def __enter__(self) -> Phase:
        r = self._rec
        if r.on:
            t = _now()
            if r.open_id >= 0:  # the enclosing phase pauses: each ns has one phase
                r.acc[r.open_id] += t - r.seg_t0
            self._t0 = t
            self._prev_id = r.open_id
            self._prev_t0 = r.open_t0
            r.open_id = self.id
            r.open_t0 = r.seg_t0 = t
            r.user_open += 1
            if r.cuda_events is not None:
                self._ev = r.gpu_start()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]:
        r = self._rec
        if r.on and self._t0:
            try:
                t = _now()
                r.acc[self.id] += t - r.seg_t0
                r.open_id = self._prev_id
                r.open_t0 = self._prev_t0
                r.seg_t0 = t
                r.user_open -= 1
                self._t0 = 0
                if self._ev is not None:
                    r.gpu_end(self._ev, self.id)
                    self._ev = None
            except Exception:
                r.errors += 1
        return False


class AutoPhase:
    """A phase opened by an automatic hook (torch_hooks.py), never by the user's code.

    It opens only when no user marker is open (the user's markers win: the time stays in
    theirs) and counts its own depth, so a nested or re-entrant call (a module inside a
    module, ``autograd.grad`` inside a backward hook) adds nothing. ``open()`` returns 0 when
    it did nothing, 1 when it opened the phase, 2 when it was already open (a nested call):
    when it returned nonzero, call ``close()``. Training thread only.
    """

    __slots__ = ("_ev", "_prev_id", "_prev_t0", "_rec", "depth", "id", "name")

    def __init__(self, recorder: StepRecorder, phase_id: int, name: str) -> None:
        self._rec = recorder
        self.id = phase_id
        self.name = name
        self.depth = 0
        self._prev_id = -1
        self._prev_t0 = 0
        self._ev: Any = None

    def open(self) -> int:
        r = self._rec
        if self.depth:
            self.depth += 1
            return 2
        if not r.on or r.user_open:
            return 0
        t = _now()
        if r.open_id >= 0:
            r.acc[r.open_id] += t - r.seg_t0
        self.depth = 1
        self._prev_id = r.open_id
        self._prev_t0 = r.open_t0
        r.open_id = self.id
        r.open_t0 = r.seg_t0 = t
        if r.cuda_events is not None:
            self._ev = r.gpu_start()
        return 1

    def close(self) -> None:
        if self.depth > 1:
            self.depth -= 1
            return
        if not self.depth:
            return
        r = self._rec
        self.depth = 0
        try:
            t = _now()
            if r.open_id == self.id:
                r.acc[self.id] += t - r.seg_t0
                r.open_id = self._prev_id
                r.open_t0 = self._prev_t0
                r.seg_t0 = t
            if self._ev is not None:
                ev, self._ev = self._ev, None
                r.gpu_end(ev, self.id)
        except Exception:
            r.errors += 1


class _NoPhase:
    """What ``phase()`` returns when the agent is disabled: as cheap as a ``with`` can be."""

    __slots__ = ()

    def __enter__(self) -> _NoPhase:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]:
        return False


NO_PHASE = _NoPhase()


class StepRecorder:
    """Per-process state of the agent. ``records`` holds finished steps as tuples:
    (seq, step, t_start_ns, t_end_ns, per-phase host ns, samples, tokens, flops, input
    elements, collective bytes, ns with a collective outstanding, GC ns, full (generation 2)
    collections); the last two are None until ``watch_gc()``."""

    def __init__(self, history: int = STEP_HISTORY) -> None:
        self.on = True
        self._stale = False
        """Set by ``idle``: the next step boundary starts clean."""
        self.names: list[str] = list(STANDARD_PHASES)
        self.phases: dict[str, Phase] = {
            n: Phase(self, i, n) for i, n in enumerate(STANDARD_PHASES)
        }
        self.acc = [0] * MAX_PHASES
        self.inputs = 0
        """Tensor elements the step's training forwards were given (``auto._Forward`` counts
        them): a rank whose inputs are larger works longer for that reason."""
        self.comm_bytes = 0
        """Bytes the step's collectives were given (``auto`` counts them in any thread: DDP's
        buckets are all-reduced from the autograd thread): the comms' payload."""
        self.comm_by: dict[str, list[int]] = {}
        """Per caller of the step's collectives (``callers.caller``: DDP, FSDP, a ZeRO
        optimizer, the loop's own function): [bytes, ns outstanding, calls]."""
        self.in_flight = InFlight()
        """When the step's collectives were outstanding (``auto`` notes each call's issue and
        completion): against the step's wait for them, how much of them hid behind compute."""
        self.open_id = -1
        self.open_t0 = 0
        self.seg_t0 = 0
        """Start of the innermost open phase's current stretch: time is exclusive, a phase
        stops counting while another opens inside it (so phases never add up past the step)."""
        self.user_open = 0
        """User markers open now: automatic phases stay shut while there is one."""
        self.sync_wait: Callable[[], int] | None = None
        self.auto: dict[str, AutoPhase] = {
            n: AutoPhase(self, i, n) for i, n in enumerate(STANDARD_PHASES)
        }
        self.spans: list[AutoPhase] = []
        """Automatic phases held open across calls (``eval_pass.EvalPass``: model.eval() to
        model.train()), beside the ones ``auto`` keeps by name."""
        self.step_no = 0
        self.seq = 0
        self.step_t0 = _now()
        self.records: collections.deque[tuple] = collections.deque(maxlen=history)
        self.gpu_records: collections.deque[tuple[int, int, int, int]] = collections.deque(
            maxlen=history * 4
        )
        """(seq, step, phase id, GPU ns), resolved later than the host record of that step."""
        self.gpu_seq = 0
        self.errors = 0
        self.explicit_steps = False
        self.auto_step = True
        self.default_flops: float | None = None
        """FLOPs per step measured once by the FLOP probe, for steps reported without any."""
        """Take a step boundary at each optimizer step, for scripts that never call step()."""
        self.on_step: list[Callable[[int], None]] = []
        """Called (with the step number) in the training thread at each step boundary."""
        self.cuda_events: Callable[[], Any] | None = None
        self._gpu_pending: collections.deque[tuple[int, int, Any, Any]] = collections.deque()
        self.gpu_dropped = 0
        self.data_cpu_ns: int | None = None
        """CPU nanoseconds the training thread used inside this step's waits for a batch
        (torch_hooks' DataLoader wrapper; None: no wait timed): with no DataLoader workers, a
        wait the thread spends computing is its own transform, one it spends asleep a read."""
        self.gc_ns = 0
        """Nanoseconds in garbage collections so far, written only by the gc callback (the
        interpreter runs one collection at a time); steps take differences, so a collection
        that lands inside ``step()`` is never lost."""
        self.gc_full = 0
        self._gc_t0 = 0
        self._gc_ns_seen = 0
        self._gc_full_seen = 0
        self._gc_cb: Callable[[str, dict], None] | None = None

    # ---- phases ----------------------------------------------------------------------------

    def phase(self, name: str) -> Phase:
        p = self.phases.get(name)
        if p is None:
            if len(self.names) >= MAX_PHASES:
                return self.phases["other"]
            p = Phase(self, len(self.names), name)
            self.names.append(name)
            self.phases[name] = p
        return p

    def move(self, ns: int, src: int, dst: int) -> None:
        """Hand ``ns`` already counted in phase ``src`` of this step to phase ``dst``: a wait
        measured inside a call another phase timed (DDP's all-reduce inside backward)."""
        if ns <= 0 or src == dst:
            return
        acc = self.acc
        if self.open_id == src:  # count its open stretch first
            t = _now()
            acc[src] += t - self.seg_t0
            self.seg_t0 = t
        ns = min(ns, acc[src])
        if ns > 0:
            acc[src] -= ns
            acc[dst] += ns

    @property
    def open_phase(self) -> tuple[str | None, int]:
        """(name, start ns) of the innermost open phase, read by the server thread. Inside
        backward, once this rank's gradients are all launched and it waits for the other
        ranks (``sync_wait``, set by auto.py), it is grad_sync: what a hung job waits in."""
        i, t0 = self.open_id, self.open_t0
        if i == BACKWARD_ID and self.sync_wait is not None:
            since = self.sync_wait()
            if since:
                return "grad_sync", since
        return (self.names[i] if 0 <= i < len(self.names) else None), t0

    # ---- step boundary -----------------------------------------------------------------------

    def step(
        self, samples: int | None = None, tokens: int | None = None, flops: float | None = None
    ) -> None:
        if not self.on:
            return
        try:
            t = _now()
            if self._stale:  # woken after idling: what was open then is dropped, here
                self._fresh_start(t)
                return
            n = len(self.names)
            acc = self.acc
            if self.open_id >= 0:  # a phase open across the boundary is split between steps
                if self._really_open(self.open_id):
                    acc[self.open_id] += t - self.seg_t0
                else:  # markers closed out of order left a closed phase "open": drop it
                    self.open_id = -1
                self.seg_t0 = t
            durations = tuple(acc[:n])
            self.acc = [0] * MAX_PHASES
            inputs, self.inputs = self.inputs or None, 0
            comm, self.comm_bytes = self.comm_bytes or None, 0
            by, self.comm_by = self.comm_by or None, {}
            comm_ns = self.in_flight.take(t) or None
            data_cpu, self.data_cpu_ns = self.data_cpu_ns, None
            if flops is None:
                flops = self.default_flops
            gc_ns: int | None
            gc_full: int | None
            if self._gc_cb is not None:
                g, full = self.gc_ns, self.gc_full
                gc_ns, gc_full = g - self._gc_ns_seen, full - self._gc_full_seen
                self._gc_ns_seen, self._gc_full_seen = g, full
            else:
                gc_ns = gc_full = None
            self.records.append(
                (self.seq, self.step_no, self.step_t0, t, durations, samples, tokens, flops,
                 inputs, comm, comm_ns, by, data_cpu, gc_ns, gc_full)
            )  # fmt: skip
            self.seq += 1
            self.step_no += 1
            self.step_t0 = t
            if self._gpu_pending:
                self.resolve_gpu()
            for hook in list(self.on_step):
                hook(self.step_no)
        except Exception:
            self.errors += 1

    # ---- idle while no monitor reads (an agent loaded by attaching) ------------------------------

    def idle(self) -> None:
        """No monitor is reading: markers go back to the cost of a disabled one (and nothing
        is recorded) until ``wake``. Safe from the agent's thread."""
        if self.on:
            self._stale = True
            self.on = False

    def wake(self) -> None:
        """A monitor reads again: record from the next step boundary on (that boundary, in the
        training thread, drops whatever was open while idle). Safe from the agent's thread."""
        self.on = True

    def _fresh_start(self, t: int) -> None:
        """In the training thread: a step boundary after idling starts clean, recording nothing
        (markers entered before or during the idle stretch no longer count)."""
        self._stale = False
        self.acc = [0] * MAX_PHASES
        self.inputs = self.comm_bytes = 0
        self.comm_by = {}
        self.data_cpu_ns = None
        self.in_flight.take(t)  # what was outstanding while idle is not this step's
        self.open_id, self.open_t0, self.seg_t0, self.user_open = -1, 0, t, 0
        for p in self.phases.values():
            p._t0 = 0
        for a in self.auto.values():
            a.depth = 0
        if self._gc_cb is not None:
            self._gc_ns_seen, self._gc_full_seen = self.gc_ns, self.gc_full
        self.step_t0 = t

    def _really_open(self, phase_id: int) -> bool:
        name = self.names[phase_id]
        p, a = self.phases.get(name), self.auto.get(name)
        return bool(
            (p is not None and p._t0)
            or (a is not None and a.depth)
            or any(s.depth and s.id == phase_id for s in self.spans)
        )

    # ---- GPU time from CUDA events, never synchronising ----------------------------------------

    def gpu_start(self) -> Any:
        try:
            ev = self.cuda_events()  # type: ignore[misc]
            ev.record()
            return ev
        except Exception:
            self.errors += 1
            return None

    def gpu_end(self, start: Any, phase_id: int) -> None:
        if len(self._gpu_pending) >= GPU_PENDING_MAX:
            self.gpu_dropped += 1
            return
        end = self.cuda_events()  # type: ignore[misc]
        end.record()
        self._gpu_pending.append((self.step_no, phase_id, start, end))

    def resolve_gpu(self) -> None:
        """Take finished pairs from the oldest; stop at the first not done (stream order says
        the later ones are not done either). ``query()`` never blocks; ``synchronize`` is never
        called."""
        pending = self._gpu_pending
        while pending:
            step, phase_id, start, end = pending[0]
            if not end.query():
                break
            pending.popleft()
            ns = int(start.elapsed_time(end) * 1e6)  # elapsed_time is in ms
            self.gpu_records.append((self.gpu_seq, step, phase_id, ns))
            self.gpu_seq += 1

    @property
    def gpu_backlog(self) -> int:
        """How far the CPU runs ahead of the GPU, in phase pairs (deep: GPU-bound)."""
        return len(self._gpu_pending)

    # ---- garbage collections ---------------------------------------------------------------

    def _on_gc(self, phase: str, info: dict) -> None:
        try:
            if phase == "start":
                self._gc_t0 = _now()
            elif self._gc_t0:
                self.gc_ns += _now() - self._gc_t0
                self._gc_t0 = 0
                if info["generation"] == 2:
                    self.gc_full += 1
        except Exception:
            self.errors += 1

    def watch_gc(self) -> None:
        """Time every collection from now on (idempotent); steps then carry GC ns."""
        if self.on and self._gc_cb is None:
            self._gc_ns_seen, self._gc_full_seen = self.gc_ns, self.gc_full
            self._gc_cb = self._on_gc
            gc.callbacks.append(self._gc_cb)

    def unwatch_gc(self) -> None:
        cb, self._gc_cb = self._gc_cb, None
        if cb is not None and cb in gc.callbacks:
            gc.callbacks.remove(cb)

    def disable(self) -> None:
        self.on = False
        self.unwatch_gc()  # a forked child must not pay for a callback on its collections
        self.records.clear()
        self._gpu_pending.clear()
