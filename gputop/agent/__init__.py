"""gputop's in-process agent: how each training step splits into phases, live.

Standard library only; torch is used when the script has imported it, never imported here.

    import gputop.agent as gt
    gt.init()                          # idempotent; also automatic on the first step()
                                       # (with no markers at all, forward, backward,
                                       # grad_sync, optimizer, checkpoint and eval are
                                       # found by hooks: gputop/agent/auto.py)
    for batch in gt.wrap(loader):      # data wait (automatic for torch DataLoaders)
        with gt.H2D: ...
        with gt.FORWARD: ...
        with gt.BACKWARD: ...
        with gt.OPTIMIZER: ...         # automatic for torch optimizers
        gt.step(samples=len(batch))    # the step boundary
    with gt.LOG: ...                   # logging and metrics; gt.EVAL, gt.CHECKPOINT too
    with gt.phase("checkpoint"): ...   # any name; custom names are allowed

``GPUTOP_DISABLE=1`` makes every call a near-free no-op. The agent turns itself off in forked
children (DataLoader workers), and nothing it does can raise into, block or slow the loop
beyond a few hundred nanoseconds per marker.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..vocab import steps as _step
from .recorder import NO_PHASE, Phase, StepRecorder

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = [
    "BACKWARD",
    "CHECKPOINT",
    "DATA_WAIT",
    "EVAL",
    "EVAL_LOG",
    "FORWARD",
    "GRAD_SYNC",
    "H2D",
    "LOG",
    "OPTIMIZER",
    "OTHER",
    "autostart",
    "enabled",
    "init",
    "phase",
    "shutdown",
    "step",
    "wrap",
]

_DISABLED = os.environ.get("GPUTOP_DISABLE", "") not in ("", "0")
_rec = StepRecorder()
_rec.on = not _DISABLED
_server: AgentServer | None = None
_owner = os.getpid()

DATA_WAIT = _rec.phases[_step.DATA_WAIT]
H2D = _rec.phases["h2d"]
FORWARD = _rec.phases[_step.FORWARD]
BACKWARD = _rec.phases[_step.BACKWARD]
GRAD_SYNC = _rec.phases[_step.GRAD_SYNC]
OPTIMIZER = _rec.phases[_step.OPTIMIZER]
CHECKPOINT = _rec.phases[_step.CHECKPOINT]
EVAL = _rec.phases[_step.EVAL]
LOG = _rec.phases[_step.LOG]
EVAL_LOG = _rec.phases[_step.EVAL_LOG]
"""Kept for scripts written before EVAL and LOG were apart (counted as evaluation)."""
OTHER = _rec.phases[_step.OTHER]


def enabled() -> bool:
    return _rec.on


def _in_worker() -> bool:
    data = sys.modules.get("torch.utils.data")
    try:
        return data is not None and data.get_worker_info() is not None
    except Exception:
        return False


def init(
    server: bool = True,
    torch_hooks: bool | None = None,
    auto_step: bool | None = None,
    measure_flops_at: int | None = None,
    idle_alone: bool = False,
) -> bool:
    """Start the agent (idempotent). Returns whether it is recording.

    ``idle_alone``: loaded by attaching (``autostart``): once the last monitor has left, the
    markers cost what disabled ones do until a monitor connects again.

    ``auto_step=False``: this script calls ``step()`` itself, so optimizer steps must not be
    taken as step boundaries (by default they are, until the first explicit ``step()``).
    ``measure_flops_at=N``: count the FLOPs of step N once with torch's FLOP counter (that one
    step runs slower) and report them for every step that gives no ``flops=``: MFU without
    doing the arithmetic. Also ``GPUTOP_FLOPS_STEP=N``."""
    global _server
    if not _rec.on or os.getpid() != _owner or _in_worker():
        return False
    if os.environ.get("GPUTOP_GC", "1") != "0":
        _rec.watch_gc()  # GC pauses per step (gc.callbacks); GPUTOP_GC=0 leaves gc alone
    if measure_flops_at is None and os.environ.get("GPUTOP_FLOPS_STEP", "").isdigit():
        measure_flops_at = int(os.environ["GPUTOP_FLOPS_STEP"])
    if measure_flops_at is not None and "torch" in sys.modules:
        from .torch_hooks import FlopProbe

        if not any(isinstance(h, FlopProbe) for h in _rec.on_step):
            _rec.on_step.append(FlopProbe(_rec, measure_flops_at))
    if auto_step is not None:
        _rec.auto_step = auto_step
    elif os.environ.get("GPUTOP_AUTO_STEP") == "0":
        _rec.auto_step = False
    if torch_hooks is None:
        torch_hooks = os.environ.get("GPUTOP_TORCH_HOOKS", "1") != "0"
    if _server is None and server and os.environ.get("GPUTOP_NO_SERVER", "") in ("", "0"):
        from .server import AgentServer

        hooks = []
        fingerprint = None
        if torch_hooks:
            from . import torch_hooks as th

            hooks.append(lambda: th.install(_rec, phases=_phases_on()))
            fingerprint = th.fingerprint
            _rec.on_step.append(th.note_autocast)
        trace = None
        if torch_hooks:
            from .trace import TraceCapture

            rank = os.environ.get("RANK", "")
            trace = TraceCapture(int(rank) if rank.isdigit() else None)
            _rec.on_step.append(trace)  # torch traces run at step boundaries, in this thread
        _server = AgentServer(_rec, fingerprint=fingerprint, tick_hooks=hooks, trace=trace,
                              idle_alone=idle_alone)  # fmt: skip
        if _server.start():
            atexit.register(shutdown)
            if _server.notice:  # the default directory was taken: say where it serves
                print(_server.notice, file=sys.stderr)
        elif _server.problem:
            print(_server.problem, file=sys.stderr)
    if torch_hooks and "torch" in sys.modules:  # now, not at the agent thread's next tick
        from . import torch_hooks as th

        try:
            th.install(_rec, phases=_phases_on(), training_thread=_training_thread())
        except Exception:
            _rec.errors += 1
    return True


def autostart() -> bool:
    """The one entry point for loading the agent into a process that is already running
    (``gputop --pid``): start it if it is not (idempotent) and install every hook torch
    allows now; the rest follows as torch modules get imported. Safe from any thread: what
    must run in the training thread waits for it. Never raises."""
    try:
        return init(idle_alone=True)
    except Exception:
        return False


def _phases_on() -> bool:
    """``GPUTOP_AUTO_PHASES=0`` keeps only the DataLoader and optimizer hooks."""
    return os.environ.get("GPUTOP_AUTO_PHASES", "1") != "0"


def _training_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def shutdown() -> None:
    """Close the socket and tell monitors the process is leaving (runs at exit)."""
    if _server is not None and os.getpid() == _owner:
        _server.stop()


def phase(name: str) -> Phase:
    """The marker for ``name`` (created once per name, then reused)."""
    if not _rec.on:
        return NO_PHASE  # type: ignore[return-value]
    try:
        return _rec.phase(name)
    except Exception:
        return NO_PHASE  # type: ignore[return-value]


def step(samples: int | None = None, tokens: int | None = None, flops: float | None = None) -> None:
    """The step boundary: the phases since the last one become one step record."""
    if not _rec.on:
        return
    _rec.explicit_steps = True
    if _server is None:
        init()
    _rec.step(samples, tokens, flops)


class _WrappedIterator:
    __slots__ = ("_inner", "_timed")

    def __init__(self, inner: Iterator[Any]) -> None:
        self._inner = inner
        # a torch DataLoader iterator is already timed by the class-level hook
        self._timed = not getattr(type(inner).__next__, "__gputop__", False)

    def __iter__(self) -> _WrappedIterator:
        return self

    def __next__(self) -> Any:
        if self._timed:
            with DATA_WAIT:
                return next(self._inner)
        return next(self._inner)


class _Wrapped:
    __slots__ = ("_iterable",)

    def __init__(self, iterable: Iterable[Any]) -> None:
        self._iterable = iterable

    def __iter__(self) -> Iterator[Any]:
        return _WrappedIterator(iter(self._iterable))

    def __len__(self) -> int:
        return len(self._iterable)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._iterable, name)


def wrap(iterable: Iterable[Any]) -> Iterable[Any]:
    """Time every ``next()`` on ``iterable`` as data wait (DALI, webdataset, your own loader)."""
    if not _rec.on:
        return iterable
    return _Wrapped(iterable)


def _after_fork_in_child() -> None:
    global _server
    _rec.disable()  # a forked DataLoader worker must not record or serve
    _server = None


os.register_at_fork(after_in_child=_after_fork_in_child)

if os.environ.get("GPUTOP_AGENT_AUTOSTART", "") not in ("", "0") and not _DISABLED:
    init()
