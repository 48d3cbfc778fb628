"""Phases found with no marker in the script: forward, backward, gradient sync, checkpoint,
eval (ARCHITECTURE.md, "How each phase is found"). Imported only once torch is loaded.

- forward / eval: torch's global module forward pre/post hooks; a depth count keeps only
  the outermost module call of the training thread (nested modules add nothing). A call under
  ``no_grad``/``inference_mode`` or of a module in eval mode is ``eval``.
- backward: ``torch.autograd.backward`` (what ``Tensor.backward`` calls) and
  ``torch.autograd.grad``, wrapped at module level (``__wrapped__`` kept).
- grad_sync: ``torch.distributed`` collectives called from Python and ``Work.wait()``; and the
  all-reduce DDP runs in C++ inside backward, through a communication hook that wraps the
  default one (or the user's, which always wins): the time from the last bucket's launch to
  the last bucket's completion, which backward spends waiting for the other ranks, is moved
  from backward to grad_sync.
- checkpoint: ``torch.save``, ``torch.distributed.checkpoint.save``/``async_save``.
- an eval pass from ``model.eval()`` to ``model.train()`` on the model that trains
  (``eval_pass.py``), and the side calls' entry points (``side_calls.py``: logging, library
  checkpoints, the gradient work outside ``optimizer.step()``, functional losses).

Every hook swallows its own errors (counted in ``rec.errors``) and lets the user's pass; none
acts while torch.compile traces (``torch.compiler.is_compiling()``), during CUDA graph capture,
in another thread than the training (main) thread, or inside a user's own marker.

Installation is safe from any thread: module attributes are swapped at once (an atomic
store), while the registrations that insert into torch's hook dicts (which the training thread
may be iterating) are left to the training thread: the first wrapped call there does them.
"""

from __future__ import annotations

import functools
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

from ..vocab.setup import HOST_BLIND_BACKENDS
from . import setup, side_calls
from .callers import caller
from .eval_pass import EvalPass
from .recorder import StepRecorder, _now

MAIN = threading.main_thread().ident
"""The training thread: the one hooks act in (ranks run their loop in the main thread)."""

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "barrier",
    "all_to_all_single",
    "all_gather_single",  # FSDP2's gathers and reductions (torch 2.13)
    "reduce_scatter_single",
    "reduce",
    "_broadcast_coalesced",  # DDP's buffer (and start-up parameter) broadcast
)
CHECKPOINT_SAVES = ("save", "async_save", "save_state_dict")

_installed: set[str] = set()
_side: list[tuple[side_calls.Site, side_calls.Choose]] = []
"""The side calls not wrapped yet (``side_calls.py``): their modules are not imported."""
_pending: list[Any] = []
"""Registrations waiting for the training thread (see the module docstring)."""
_ddp_types: dict[type, bool] = {}


def _never() -> bool:
    return False


class _Guard:
    """What every hook checks first, cheaply: torch.compile tracing, CUDA graph capture."""

    compiling: Callable[[], bool] = staticmethod(_never)
    cuda: Any = None

    @classmethod
    def bind(cls, torch: Any) -> None:
        cls.compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _never
        cls.cuda = torch.cuda


def _capturing(rec: StepRecorder) -> bool:
    """A CUDA graph is being captured on this stream (only asked once CUDA events are on: a
    process that never used CUDA cannot be capturing)."""
    if rec.cuda_events is None:
        return False
    try:
        return bool(_Guard.cuda.is_current_stream_capturing())
    except Exception:
        return False


def ready(name: str) -> Any:
    """Module ``name`` once its import has finished (the agent thread may look while the
    training thread is still importing torch), else None."""
    m = sys.modules.get(name)
    if m is None or getattr(getattr(m, "__spec__", None), "_initializing", False):
        return None
    return m


def install(rec: StepRecorder, training_thread: bool) -> None:
    """Install whatever torch modules allow now (idempotent; the agent thread retries)."""
    torch = ready("torch")
    if torch is None or not rec.on:
        return
    try:
        _Guard.bind(torch)
        if "backward" not in _installed and ready("torch.autograd"):
            _wrap_backward(rec, torch.autograd)
            _installed.add("backward")
        if "save" not in _installed and hasattr(torch, "save"):
            _wrap_attr(torch, "save", rec.auto["checkpoint"], rec)
            _installed.add("save")
        dcp = ready("torch.distributed.checkpoint")
        if "dcp" not in _installed and dcp is not None and hasattr(dcp, "save"):
            for name in CHECKPOINT_SAVES:
                _wrap_attr(dcp, name, rec.auto["checkpoint"], rec)
            _installed.add("dcp")
        c10d = ready("torch.distributed.distributed_c10d")
        dist = ready("torch.distributed")
        if "dist" not in _installed and c10d is not None and dist is not None:
            _wrap_collectives(rec, dist, c10d)
            _installed.add("dist")
        ddp = ready("torch.nn.parallel.distributed")
        if "ddp" not in _installed and ddp is not None:
            _wrap_ddp_registration(ddp.DistributedDataParallel)
            _installed.add("ddp")
        if "forward" not in _installed and ready("torch.nn.modules.module"):
            _installed.add("forward")
            _pending.append(lambda: _hook_forward(rec, torch))
        if "compiled" not in _installed and _FORWARD and ready("torch._dynamo.eval_frame"):
            _wrap_compiled_modules(rec)
            _installed.add("compiled")
        if "side" not in _installed:
            _side[:] = side_calls.sites(rec, _loss_phase(rec, torch))
            _installed.add("side")
        if _side:
            side_calls.install(_side, ready, lambda o, a, c: _wrap_choosing(o, a, c, rec))
        if training_thread:
            run_pending(rec)
    except Exception:
        rec.errors += 1


def register_later(fn: Any) -> None:
    _pending.append(fn)


def run_pending(rec: StepRecorder) -> None:
    """Do the registrations left for the training thread (called there only)."""
    while _pending:
        fn = _pending.pop(0)
        try:
            fn()
        except Exception:
            rec.errors += 1


def _on_training_thread(rec: StepRecorder) -> bool:
    if threading.get_ident() != MAIN:
        return False
    if _pending:
        run_pending(rec)
    return True


# ---- forward and eval ------------------------------------------------------------------------


DISCOVER_STEPS = 2
"""Steps the global module hooks stay on to find the outermost modules (the roots)."""
REDISCOVER_EVERY = 256
"""Steps between two discovery rounds (a model first called later: an eval model)."""


class _Forward:
    """The outermost module call of the training thread, found cheaply.

    torch's global forward hooks make every module call take ``_call_impl``'s slow path
    (about 1.1 us per call here, whatever the hooks do), so they are on only while finding the
    roots: for DISCOVER_STEPS steps after installation and again every REDISCOVER_EVERY
    steps. Then each root's class gets its ``forward`` wrapped at class level (pickling and
    ``state_dict`` see nothing) and the global hooks are removed: modules that are never a
    root cost nothing. Both paths share one depth count. Not while torch.compile is in use:
    dynamo guards on the global hooks, so they are never switched on and off then."""

    def __init__(self, rec: StepRecorder, torch: Any) -> None:
        self.rec = rec
        self.torch = torch
        self.depth = 0
        self.open: Any = None
        self.fwd, self.ev = rec.auto["forward"], rec.auto["eval"]
        self.grad_enabled = torch.is_grad_enabled
        self.handles: list[Any] = []
        self.roots: set[type] = set()
        self.wrapped: set[type] = set()
        self.learning: dict[type, bool] = {}
        self.steps = 0
        self.eval_pass = EvalPass(rec)
        """model.eval() to model.train() on the model that trains (``eval_pass.py``)."""
        self.trained = 0
        """The id of the module the last training forward was of: the one whose eval mode
        is an evaluation (a teacher's or an EMA copy's eval() is not)."""

    def enter(self, module: Any, args: Any = (), kwargs: Any = None) -> None:
        d = self.depth
        self.depth = d + 1
        if d:
            return
        try:  # never raises: the caller pairs this with leave()
            t = type(module)
            if t not in self.wrapped:
                self.roots.add(t)
            if _ddp_types.get(t, True):  # unknown or DDP: a new DDP model gets its hook
                _note_root(module)
            setup.note_root(module)  # how it is parallelised, read later by the agent thread
            if _capturing(self.rec):
                return
            training = module.training and self.grad_enabled()
            if training and self.learns(t, module):  # a model, not a loss: what the step
                # computes on (a rank given more works longer)
                self.rec.inputs += elements(self.torch.Tensor, args) + (
                    elements(self.torch.Tensor, tuple(kwargs.values())) if kwargs else 0
                )
                self.trained = id(module)
            ph = self.fwd if training else self.ev
            self.open = ph if ph.open() else None
        except Exception:
            self.rec.errors += 1

    def learns(self, t: type, module: Any) -> bool:
        """The module has parameters (decided once per class): its inputs are the step's,
        while a loss module's are the model's outputs."""
        has = self.learning.get(t)
        if has is None:
            has = self.learning[t] = next(iter(module.parameters()), None) is not None
        return has

    def leave(self) -> None:
        d = self.depth
        if d <= 0:  # installed while this call was running
            return
        self.depth = d - 1
        if d == 1 and self.open is not None:
            ph, self.open = self.open, None
            ph.close()

    def pre(self, module: Any, args: Any) -> None:
        try:
            if not _Guard.compiling() and threading.get_ident() == MAIN:
                self.enter(module, args)
        except Exception:
            self.rec.errors += 1

    def post(self, module: Any, args: Any, output: Any) -> None:
        try:
            if not _Guard.compiling() and threading.get_ident() == MAIN:
                self.leave()
        except Exception:
            self.rec.errors += 1

    def arm(self) -> None:
        from torch.nn.modules import module as modules

        if not self.handles:
            self.handles = [
                modules.register_module_forward_pre_hook(self.pre),
                modules.register_module_forward_hook(self.post, always_call=True),
            ]
            self.steps = 0

    def on_step(self, step_no: int) -> None:
        """At each step boundary (training thread): end or start a discovery round."""
        try:
            self.steps += 1
            if self.handles:
                found = self.roots or self.wrapped
                if self.steps >= DISCOVER_STEPS and found and not _compiled_now():
                    for cls in self.roots - self.wrapped:
                        self.wrap_class(cls)
                    self.roots.clear()
                    for h in self.handles:
                        h.remove()
                    self.handles = []
                    self.steps = 0
            elif self.steps >= REDISCOVER_EVERY and not _compiled_now():
                self.arm()
        except Exception:
            self.rec.errors += 1

    def wrap_class(self, cls: type, attr: str = "forward") -> None:
        self.wrapped.add(cls)
        if attr == "forward" and self.learning.get(cls):
            self.wrap_train(cls)
        orig = getattr(cls, attr)
        if getattr(orig, "__gputop__", False):
            return
        st = self

        @functools.wraps(orig)
        def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
            entered = False
            try:
                if not _Guard.compiling() and threading.get_ident() == MAIN:
                    st.enter(self, args, kwargs)
                    entered = True
            except Exception:
                st.rec.errors += 1
            try:
                return orig(self, *args, **kwargs)
            finally:
                if entered:
                    try:
                        st.leave()
                    except Exception:
                        st.rec.errors += 1

        forward.__gputop__ = True  # type: ignore[attr-defined]
        setattr(cls, attr, forward)

    def wrap_train(self, cls: type) -> None:
        """A root that learns: its ``train(mode)`` (what ``eval()`` calls, and what a parent's
        ``train``/``eval`` calls on it) tells the eval pass when it is the model that trains;
        other modules' cost nothing."""
        orig = getattr(cls, "train", None)
        if orig is None or getattr(orig, "__gputop__", False):
            return  # a base class's, already telling (it serves this class too)
        st, rec = self, self.rec

        @functools.wraps(orig)
        def train(self: Any, mode: bool = True) -> Any:
            try:
                if (
                    id(self) == st.trained
                    and threading.get_ident() == MAIN
                    and not _Guard.compiling()
                    and not _capturing(rec)
                ):
                    st.eval_pass.mode(bool(mode))
            except Exception:
                rec.errors += 1
            return orig(self, mode)

        train.__gputop__ = True  # type: ignore[attr-defined]
        cls.train = train  # type: ignore[attr-defined]


ELEMENTS_FAN = 16
"""Items looked at in each list, tuple or dict of a forward's inputs (a batch is a few)."""


def elements(tensor: type, value: Any, depth: int = 0) -> int:
    """Tensor elements in a forward's inputs: tensors, and lists, tuples and dicts of them two
    levels deep (a batch, a dict of ``input_ids`` and ``attention_mask``); a few checks a call."""
    if isinstance(value, tensor):
        return int(value.numel())  # type: ignore[attr-defined]
    if depth >= 2:
        return 0
    if isinstance(value, dict):
        value = tuple(value.values())
    if isinstance(value, list | tuple):
        return sum(elements(tensor, v, depth + 1) for v in value[:ELEMENTS_FAN])
    return 0


def _compiled_now() -> bool:
    """torch.compile has compiled something (or we cannot tell)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return False
    try:
        return int(utils.counters["stats"]["unique_graphs"]) > 0
    except Exception:
        return True


def _hook_forward(rec: StepRecorder, torch: Any) -> None:
    st = _Forward(rec, torch)
    st.arm()
    rec.on_step.append(st.on_step)
    # torch warns that global hooks fire once more for torch.compile's wrapper module: these
    # count depth, so it changes nothing; the user should not see a warning about gputop
    warnings.filterwarnings(
        "ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks"
    )
    _FORWARD.append(st)


def _wrap_compiled_modules(rec: StepRecorder) -> None:
    """A ``torch.compile``d module is a root whose inside is traced (where hooks do nothing):
    its wrapper's ``__call__`` is timed at class level, with or without the global hooks."""
    eval_frame = ready("torch._dynamo.eval_frame")
    cls = getattr(eval_frame, "OptimizedModule", None)
    if cls is not None and _FORWARD:
        _FORWARD[0].wrap_class(cls, "__call__")


_FORWARD: list[_Forward] = []
"""The forward depth state (tests read it)."""


# ---- backward and the DDP wait inside it --------------------------------------------------------


class _SyncLedger:
    """Bucket launches and completions of DDP's gradient all-reduce in the current backward,
    written by the communication hooks (in the autograd thread, and the collective's thread
    for completions) and read by the backward wrapper once backward has returned."""

    __slots__ = ("done", "launched")

    def __init__(self) -> None:
        self.launched = 0
        self.done = 0

    def begin(self) -> None:
        self.launched = self.done = 0

    def waiting_since(self) -> int:
        """When this rank started waiting for the others inside the current backward (its last
        bucket launched, not yet complete), else 0: what the heartbeat calls grad_sync."""
        launched, done = self.launched, self.done
        return launched if launched and done < launched else 0

    def exposed_wait(self, end: int) -> int:
        """ns from the last bucket's launch (this rank's gradients ready) to the last bucket's
        completion (every rank's are): the time this rank waited for the slowest."""
        if not self.launched:
            return 0
        done = self.done if self.done else end
        return max(0, min(done, end) - self.launched)


LEDGER = _SyncLedger()


def _wrap_backward(rec: StepRecorder, autograd: Any) -> None:
    bwd, sync = rec.auto["backward"], rec.auto["grad_sync"]
    rec.sync_wait = LEDGER.waiting_since

    def wrap(orig: Any) -> Any:
        @functools.wraps(orig)
        def timed(*args: Any, **kwargs: Any) -> Any:
            _trains()
            opened = _start(bwd, rec)
            if opened == 1:
                LEDGER.begin()
            try:
                return orig(*args, **kwargs)
            finally:
                if opened == 1:
                    try:
                        wait = LEDGER.exposed_wait(_now())
                        LEDGER.begin()
                        bwd.close()
                        rec.move(wait, bwd.id, sync.id)
                    except Exception:
                        rec.errors += 1
                elif opened:
                    bwd.close()

        timed.__gputop__ = True  # type: ignore[attr-defined]
        return timed

    for name in ("backward", "grad"):
        orig = getattr(autograd, name, None)
        if orig is not None and not getattr(orig, "__gputop__", False):
            setattr(autograd, name, wrap(orig))


def _trains() -> None:
    """A backward on the training thread: an eval pass still open was training (eval mode)."""
    try:
        if _FORWARD and _FORWARD[0].eval_pass.open and threading.get_ident() == MAIN:
            _FORWARD[0].eval_pass.trains()
    except Exception:
        pass


# ---- collectives and checkpoints -------------------------------------------------------------


def _start(phase: Any, rec: StepRecorder) -> int:
    """Open ``phase`` around a wrapped call: what ``open()`` returned, or 0 when the call is
    not to be timed (compiling, capturing, another thread) or the agent failed."""
    try:
        if _Guard.compiling() or not _on_training_thread(rec) or _capturing(rec):
            return 0
        return phase.open()
    except Exception:
        rec.errors += 1
        return 0


def _timed(orig: Any, phase: Any, rec: StepRecorder) -> Any:
    """``orig`` timed in ``phase`` at each call."""
    return _timed_in(orig, side_calls.always(phase), rec)


def _timed_in(orig: Any, choose: side_calls.Choose, rec: StepRecorder) -> Any:
    """``orig`` timed in the phase ``choose()`` gives at each call (None: not timed)."""

    @functools.wraps(orig)
    def timed(*args: Any, **kwargs: Any) -> Any:
        phase = None
        try:
            phase = choose()
        except Exception:
            rec.errors += 1
        opened = _start(phase, rec) if phase is not None else 0
        try:
            return orig(*args, **kwargs)
        finally:
            if opened and phase is not None:
                phase.close()

    timed.__gputop__ = True  # type: ignore[attr-defined]
    return timed


def _loss_phase(rec: StepRecorder, torch: Any) -> side_calls.Choose:
    """A functional loss is the forward's while training, the evaluation's under no_grad or
    inside an eval pass."""
    fwd, ev, grad_enabled = rec.auto["forward"], rec.auto["eval"], torch.is_grad_enabled

    def choose() -> Any:
        passing = bool(_FORWARD) and _FORWARD[0].eval_pass.open
        return fwd if grad_enabled() and not passing else ev

    return choose


def _wrap_choosing(owner: Any, name: str, choose: side_calls.Choose, rec: StepRecorder) -> None:
    """``owner.name`` timed in the phase ``choose()`` gives at each call, unless there is
    nothing callable there or it is wrapped already."""
    orig = getattr(owner, name, None)
    if callable(orig) and not getattr(orig, "__gputop__", False):
        setattr(owner, name, _timed_in(orig, choose, rec))


def _wrap_attr(owner: Any, name: str, phase: Any, rec: StepRecorder) -> None:
    _wrap_choosing(owner, name, side_calls.always(phase), rec)


_NOWHERE = [0, 0, 0]
"""Where a call whose caller could not be read adds its figures (never sent)."""
_INSIDE = threading.local()
"""Per thread: how deep in counted collectives it is (only the outermost call is counted)."""


TENSOR_KWARGS = (
    "tensor", "tensor_list", "output", "input", "output_tensor", "input_tensor",
    "output_tensor_list", "input_tensor_list", "scatter_list", "gather_list",
)  # fmt: skip
"""The names torch.distributed's collectives take their tensors by: a caller that passes them
by keyword (ZeroRedundancyOptimizer's ``broadcast(tensor=...)``) gives them here."""


def payload(tensor: type, args: Any, kwargs: Any = None) -> int:
    """Bytes a collective is given: the largest of its first two arguments (a tensor, or a
    list of them: all_reduce's tensor; all_gather_into_tensor's and reduce_scatter_tensor's
    full-size side), or of its tensors given by keyword, a few checks a call."""
    most = 0
    given = [*args[:2], *(kwargs[k] for k in TENSOR_KWARGS if kwargs and k in kwargs)]
    for value in given:
        items: Any = value[:ELEMENTS_FAN] if isinstance(value, list | tuple) else (value,)
        size = 0
        for t in items:
            if isinstance(t, tensor):
                size += int(t.numel()) * int(t.element_size())  # type: ignore[attr-defined]
        most = max(most, size)
    return most


def _counted(orig: Any, phase: Any, rec: StepRecorder, tensor: type) -> Any:
    """``_timed``, and the call's payload added to the step's collective bytes from whatever
    thread makes it (DDP's default hook all-reduces its buckets in the autograd thread)."""
    timed = _timed(orig, phase, rec)

    @functools.wraps(orig)
    def counted(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_INSIDE, "depth", 0)
        if depth:  # a collective torch makes inside another is not more bytes, nor more time
            return timed(*args, **kwargs)
        entry = _NOWHERE
        try:
            size = payload(tensor, args, kwargs)
            rec.comm_bytes += size
            entry = rec.comm_by.get(who := caller()) or rec.comm_by.setdefault(who, [0, 0, 0])
            entry[0] += size
            entry[2] += 1
        except Exception:
            rec.errors += 1
        flight = rec.in_flight
        t0 = _now()
        flight.issued(t0)
        pending = False
        _INSIDE.depth = 1
        try:
            work = timed(*args, **kwargs)
            pending = (
                bool(kwargs.get("async_op"))
                and _host_sees_completion()
                and _completes_later(work, flight, entry, t0)
            )
            return work
        finally:
            _INSIDE.depth = 0
            if not pending:  # a blocking call (or one whose completion cannot be seen)
                t1 = _now()
                flight.completed(t1)
                entry[1] += t1 - t0

    counted.__gputop__ = True  # type: ignore[attr-defined]
    return counted


_HOST_SEES: list[bool] = []
"""Whether the default process group's backend completes its futures where the host sees it
(not NCCL's), learnt once at the first async collective."""


def _host_sees_completion() -> bool:
    """False on NCCL: a completion callback there would cost every collective of a GPU job for
    a time the host does not see (the call's return then stands for it)."""
    if not _HOST_SEES:
        try:
            dist = sys.modules["torch.distributed"]
            _HOST_SEES.append(str(dist.get_backend()) not in HOST_BLIND_BACKENDS)
        except Exception:
            return False  # no default group yet: asked again next time
    return _HOST_SEES[0]


def _completes_later(work: Any, flight: Any, entry: list[int], t0: int) -> bool:
    """Note the completion of an async collective when its future completes (in the backend's
    thread), and its time outstanding under its caller; False when the work has no future
    (the call's return then stands for it)."""
    try:
        future = work.get_future()

        def done(_fut: Any) -> None:
            t1 = _now()
            flight.completed(t1)
            entry[1] += t1 - t0

        future.then(done)
        return True
    except Exception:
        return False


def _wrap_collectives(rec: StepRecorder, dist: Any, c10d: Any) -> None:
    """``torch.distributed.X`` is ``distributed_c10d.X``: both names get the same wrapper, so
    ``dist.all_reduce`` and c10d's own calls between its functions are timed once (depth)."""
    sync = rec.auto["grad_sync"]
    import torch

    for name in COLLECTIVES:
        orig = getattr(c10d, name, None) or getattr(dist, name, None)
        if not callable(orig) or getattr(orig, "__gputop__", False):
            continue
        timed = _counted(orig, sync, rec, torch.Tensor)
        for owner in (dist, c10d):
            if getattr(owner, name, None) is orig:
                setattr(owner, name, timed)
    work = getattr(dist, "Work", None) or getattr(c10d, "Work", None)
    wait = getattr(work, "wait", None)
    if work is not None and wait is not None and not getattr(wait, "__gputop__", False):
        try:
            work.wait = _timed(wait, sync, rec)
        except Exception:
            rec.errors += 1


# ---- DDP: a communication hook around the default (or the user's) all-reduce -------------------


class _CommHook:
    """The one hook DDP allows per model, registered by gputop: it calls ``target`` (DDP's
    default all-reduce, or the hook the user registers, before or after), notes in LEDGER when
    each bucket was launched and when it completed, and returns a future that completes only
    after that note (so backward, which waits on it, always sees the time)."""

    def __init__(self, state: Any, hook: Any, ours: bool) -> None:
        self.state = state
        self.hook = hook
        self.ours = ours
        """True while the target is gputop's choice (DDP's default all-reduce)."""
        self.registered = False

    def __call__(self, _state: Any, bucket: Any) -> Any:
        fut = self.hook(self.state, bucket)
        try:
            LEDGER.launched = _now()
            return fut.then(_note_done)
        except Exception:
            return fut


def _note_done(fut: Any) -> Any:
    LEDGER.done = _now()
    return fut.value()


def _hook_function(tramp: _CommHook) -> Any:
    def gputop_comm_hook(state, bucket):  # no annotations: DDP checks them
        return tramp(state, bucket)

    gputop_comm_hook.__qualname__ = getattr(tramp.hook, "__qualname__", "gputop_comm_hook")
    return gputop_comm_hook


def _wrap_ddp_registration(ddp_cls: Any) -> None:
    original = ddp_cls.register_comm_hook
    if getattr(original, "__gputop__", False):
        return
    builtin = getattr(ddp_cls, "_register_builtin_comm_hook", None)

    @functools.wraps(original)
    def register_comm_hook(self: Any, state: Any, hook: Any) -> None:
        tramp = self.__dict__.get("_gputop_sync")
        if tramp is not None and tramp.ours and tramp.registered:
            # gputop's default hook is in place: the user's takes over inside it
            self._check_comm_hook(hook)
            self.logger._set_comm_hook_name(hook.__qualname__)
            self._comm_hooks.append((hook, state))
            tramp.state, tramp.hook, tramp.ours = state, hook, False
            return
        if tramp is not None:
            return original(self, state, hook)  # DDP's own answer (a second registration)
        self._check_comm_hook(hook)  # the user's mistakes, reported by DDP as usual
        tramp = _CommHook(state, hook, ours=False)
        self.__dict__["_gputop_sync"] = tramp
        original(self, state, _hook_function(tramp))
        tramp.registered = True
        self._comm_hooks[-1] = (hook, state)  # what DDP lists is the user's hook

    register_comm_hook.__gputop__ = True  # type: ignore[attr-defined]
    ddp_cls.register_comm_hook = register_comm_hook

    if builtin is not None:

        @functools.wraps(builtin)
        def register_builtin(self: Any, comm_hook_type: Any) -> None:
            tramp = self.__dict__.get("_gputop_sync")
            if tramp is not None and tramp.ours and tramp.registered:
                hook = _builtin_equivalent(comm_hook_type)
                if hook is not None:
                    self.logger._set_comm_hook_name(str(comm_hook_type))
                    tramp.hook, tramp.ours = hook, False
                    return
            if tramp is None:
                self.__dict__["_gputop_sync"] = _CommHook(None, None, ours=False)
            return builtin(self, comm_hook_type)  # C++ hook: not timed

        register_builtin.__gputop__ = True  # type: ignore[attr-defined]
        ddp_cls._register_builtin_comm_hook = register_builtin
        if hasattr(ddp_cls, "register_builtin_comm_hook"):
            ddp_cls.register_builtin_comm_hook = register_builtin


def _builtin_equivalent(kind: Any) -> Any:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    name = getattr(kind, "name", str(kind)).rsplit(".", 1)[-1]
    return {
        "ALLREDUCE": default_hooks.allreduce_hook,
        "FP16_COMPRESS": default_hooks.fp16_compress_hook,
    }.get(name)


def _note_root(module: Any) -> None:
    """An outermost module call: a DDP model gets gputop's hook before its first backward."""
    t = type(module)
    is_ddp = _ddp_types.get(t)
    if is_ddp is None:
        ddp = sys.modules.get("torch.nn.parallel.distributed")
        is_ddp = _ddp_types[t] = ddp is not None and isinstance(module, ddp.DistributedDataParallel)
    if is_ddp and "_gputop_sync" not in module.__dict__:
        hook_ddp(module)


def hook_ddp(module: Any) -> bool:
    """Register gputop's timing hook around DDP's default all-reduce, unless the model already
    has a hook (the user's stays, untouched) or uses the Python reducer (compiled autograd)."""
    tramp = _CommHook(None, None, ours=True)
    module.__dict__["_gputop_sync"] = tramp  # seen: never tried twice
    if getattr(module, "_comm_hooks", None) or getattr(module, "_use_python_reducer", False):
        return False
    try:
        logging = module._get_ddp_logging_data()
        if logging.get("comm_hook"):  # a built-in (C++) hook registered before gputop came
            return False
    except Exception:
        pass
    try:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        tramp.state, tramp.hook = module.process_group, allreduce_hook
        module.__dict__["_gputop_sync"] = tramp
        dist = sys.modules["torch.distributed"]
        fn = _hook_function(tramp)
        fn.__qualname__ = "gputop_timed_allreduce_hook"
        dist._register_comm_hook(module.reducer, tramp.state, fn)
        tramp.registered = True
        return True
    except Exception:
        return False  # a hook was there after all (C++ refuses a second): leave it
