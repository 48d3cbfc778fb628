"""Automatic capture when torch is in the process. Imported only once torch is loaded.

- DataLoader wait: ``_BaseDataLoaderIter.__next__`` is wrapped at class level, which covers the
  single- and multi-process iterators and leaves ``iter(loader)`` the same type.
- Optimizer phase and, for scripts that never call ``step()``, the step boundary: torch's
  global optimizer step pre/post hooks, which fire for every optimizer.
- Forward, backward, gradient sync, checkpoints and eval: auto.py.
- GPU time per phase: CUDA events from the current stream, resolved later with ``query()``.
- A configuration fingerprint, so a lever can name the user's actual setting.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
from time import thread_time_ns
from typing import Any

from . import auto, setup
from .recorder import StepRecorder

_installed: set[str] = set()
_loader_config: dict[str, Any] = {}


def install(
    rec: StepRecorder,
    data: bool = True,
    optimizer: bool = True,
    gpu: bool = True,
    phases: bool = True,
    training_thread: bool = False,
) -> None:
    """Install whatever is possible now; safe to call repeatedly (the agent thread does) and
    from any thread: what must run in the training thread waits for it (auto.py)."""
    if auto.ready("torch") is None:
        return  # not imported, or still importing
    if data and "data" not in _installed and auto.ready("torch.utils.data.dataloader"):
        _wrap_dataloader(rec)
        _installed.add("data")
    if optimizer and "optim" not in _installed and auto.ready("torch.optim.optimizer"):
        _installed.add("optim")
        auto.register_later(lambda: _hook_optimizers(rec))
    if phases:
        auto.install(rec, training_thread)
    elif training_thread:
        auto.run_pending(rec)
    if gpu and "gpu" not in _installed and "torch" in sys.modules:
        _installed.add("gpu")
        torch = sys.modules["torch"]
        try:
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                rec.cuda_events = lambda: torch.cuda.Event(enable_timing=True)
            else:
                _installed.discard("gpu")  # try again once CUDA is initialised
        except Exception:
            pass


def _wrap_dataloader(rec: StepRecorder) -> None:
    from torch.utils.data import dataloader

    cls = dataloader._BaseDataLoaderIter
    original = cls.__next__
    if getattr(original, "__gputop__", False):
        return
    import torch

    wait, evaluating = rec.auto["data_wait"], rec.auto["eval"]
    grad_enabled = torch.is_grad_enabled

    def __next__(self):
        # a batch fetched with gradients off (no_grad, inference_mode: a validation loop,
        # Lightning's and transformers' included) or while the model is in eval mode is the
        # eval pass's wait, not training's
        ph = wait
        try:
            training = grad_enabled()
            if rec.on and not _loader_config and training:  # the training loader's settings
                _note_loader(self)
            if auto._on_training_thread(rec):
                passing = auto._FORWARD and auto._FORWARD[0].eval_pass.open
                ph = wait if training and not passing else evaluating
                opened = ph.open()
            else:
                opened = 0
        except Exception:
            rec.errors += 1
            opened = 0
        cpu0 = thread_time_ns() if opened == 1 and ph is wait else 0
        try:
            return original(self)
        finally:
            if opened:
                ph.close()
            if cpu0:
                rec.data_cpu_ns = (rec.data_cpu_ns or 0) + thread_time_ns() - cpu0

    __next__.__gputop__ = True  # type: ignore[attr-defined]
    __next__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__next__ = __next__  # type: ignore[method-assign]  # the loader's iterator, patched on purpose


def _note_loader(it: Any) -> None:
    with contextlib.suppress(Exception):
        _loader_config.update(
            num_workers=getattr(it, "_num_workers", None),
            pin_memory=getattr(it, "_pin_memory", None),
            prefetch_factor=getattr(it, "_prefetch_factor", None),
            persistent_workers=getattr(it, "_persistent_workers", None),
        )


def _hook_optimizers(rec: StepRecorder) -> None:
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    opt = rec.auto["optimizer"]

    def pre(optimizer, args, kwargs) -> None:
        try:
            if not auto._Guard.compiling() and threading.get_ident() == auto.MAIN:
                opt.open()
        except Exception:
            rec.errors += 1

    def post(optimizer, args, kwargs) -> None:
        try:
            if auto._Guard.compiling():
                return
            opt.close()
            if rec.auto_step and not rec.explicit_steps:
                rec.step()
        except Exception:
            rec.errors += 1

    register_optimizer_step_pre_hook(pre)
    register_optimizer_step_post_hook(post)


def fingerprint() -> dict[str, Any]:
    """The settings a lever may name. Cheap; called by the agent thread every few seconds."""
    fp: dict[str, Any] = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}
    # the collector's knobs (a GC lever applied in the code shows as one of these changed)
    fp["gc"] = {
        "enabled": gc.isenabled(),
        "threshold": ",".join(map(str, gc.get_threshold())),
        "frozen": gc.get_freeze_count(),
    }
    torch = auto.ready("torch")
    if torch is None:  # not imported, or still importing: nothing of it to touch yet
        return fp
    fp["torch"] = getattr(torch, "__version__", None)
    fp["cuda"] = getattr(getattr(torch, "version", None), "cuda", None)
    for key, call in (
        ("intra_op_threads", lambda: intra_op_threads(torch)),
        ("interop_threads", lambda: torch.get_num_interop_threads()),
        ("float32_matmul_precision", lambda: torch.get_float32_matmul_precision()),
        ("cudnn_benchmark", lambda: bool(torch.backends.cudnn.benchmark)),
        ("anomaly_detection", lambda: bool(torch.is_anomaly_enabled())),
        ("compiled", lambda: _compiled(torch)),
    ):
        try:
            fp[key] = call()
        except Exception:
            fp[key] = None
    fp["parallel"] = _guarded(lambda: setup.kept("parallel", _parallel(torch)))
    fp["framework"] = _guarded(
        lambda: setup.kept("framework", setup.framework_of(setup.frames_of(auto.MAIN)))
    )
    fp["autocast"] = _AUTOCAST.get("seen")
    fp["autocast_dtype"] = _AUTOCAST.get("dtype")
    fp["param_dtype"] = _AUTOCAST.get("param_dtype")
    if _loader_config:
        fp["dataloader"] = dict(_loader_config)
    return fp


def _guarded(read: Any) -> Any:
    """A part of the setup, or None when reading it failed (never an error in the job)."""
    try:
        return read()
    except Exception:
        return None


def _parallel(torch: Any) -> dict[str, Any]:
    """The wrapper of the outermost module, with the process group's backend (nccl, gloo)."""
    group = _process_group(torch)
    reading = setup.parallel_of(setup.root(), group)
    if reading and group:
        with contextlib.suppress(Exception):
            reading["backend"] = str(torch.distributed.get_backend())
    return reading


def _process_group(torch: Any) -> bool:
    """Whether torch.distributed has a process group (a loop may call collectives itself)."""
    dist = getattr(torch, "distributed", None)
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized())
    except Exception:
        return False


def intra_op_threads(torch: Any) -> int | None:
    """``torch.get_num_threads()`` as a thread that never asked before sees it. A thread keeps
    the count it saw first (OpenMP's setting is per thread; torch reads its global once per
    thread), so the agent thread, asking every half second from before the script's
    ``torch.set_num_threads(4)``, would report the machine's default for good. A fresh thread
    reads torch's global: what the script set, or the default OMP_NUM_THREADS gives."""
    seen: list[int] = []
    reader = threading.Thread(
        target=lambda: seen.append(int(torch.get_num_threads())), name="gputop-threads",
        daemon=True,
    )  # fmt: skip
    reader.start()
    reader.join(1.0)
    return seen[0] if seen else None


_AUTOCAST: dict[str, Any] = {}
"""seen (autocast on at any sample), dtype (its dtype then), param_dtype (the weights' dtype
of the first module called after a sampled step boundary)."""
_probe: list[Any] = []
"""The handle of the pending one-shot forward pre-hook (at most one)."""


def note_autocast(step_no: int) -> None:
    """Autocast state is thread-local and usually on only around the forward, so it is read in
    the training thread every 64 steps: at the step boundary, and at the first module call
    after it through a global forward pre-hook that removes itself on that call (so one call
    in 64 steps pays for it). Not while torch.compile is in use: dynamo guards on global
    hooks, and adding and removing one would make it recompile."""
    if step_no % 64 != 1:
        return
    torch = sys.modules.get("torch")
    if torch is None:
        return
    _read_autocast(torch)
    modules = sys.modules.get("torch.nn.modules.module")
    if not _probe and modules is not None and _compiled(torch) == 0:
        with contextlib.suppress(Exception):
            _probe.append(modules.register_module_forward_pre_hook(_first_forward))


def _first_forward(module: Any, args: Any) -> None:
    while _probe:
        with contextlib.suppress(Exception):
            _probe.pop().remove()
    torch = sys.modules.get("torch")
    if torch is not None:
        _read_autocast(torch, module)


def _read_autocast(torch: Any, module: Any = None) -> None:
    try:
        dtype = _autocast_dtype(torch)
    except Exception:
        return
    if dtype is not None:
        _AUTOCAST["seen"] = True
        _AUTOCAST["dtype"] = dtype
    else:
        _AUTOCAST.setdefault("seen", False)
    if module is not None:
        with contextlib.suppress(Exception):
            p = next(module.parameters(), None)
            if p is not None:
                _AUTOCAST["param_dtype"] = _dtype_name(p.dtype)


def _autocast_dtype(torch: Any) -> str | None:
    """The dtype of the autocast on in this thread (CUDA first, then CPU), or None."""
    try:  # torch >= 2.4: one API for every device type
        for device in ("cuda", "cpu"):
            if torch.is_autocast_enabled(device):
                return _dtype_name(torch.get_autocast_dtype(device))
        return None
    except Exception:
        pass
    if torch.is_autocast_enabled():
        return _dtype_name(torch.get_autocast_gpu_dtype())
    if torch.is_autocast_cpu_enabled():
        return _dtype_name(torch.get_autocast_cpu_dtype())
    return None


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")[:32]


def _compiled(torch: Any) -> int | None:
    """How many frames torch.compile has compiled (0: not used)."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    if dynamo is None:
        return 0
    try:
        return int(dynamo.counters["stats"]["unique_graphs"])
    except Exception:
        return None


class FlopProbe:
    """Counts the FLOPs of one whole training step with torch's FlopCounterMode, entered and
    left at step boundaries in the training thread; later steps without ``flops=`` get it."""

    def __init__(self, rec: StepRecorder, at_step: int) -> None:
        self.rec = rec
        self.at_step = max(1, at_step)  # never the first step: it includes warm-up
        self.mode: Any = None
        self.flops: float | None = None

    def __call__(self, step_no: int) -> None:
        try:
            if step_no == self.at_step and self.mode is None:
                from torch.utils.flop_counter import FlopCounterMode

                self.mode = FlopCounterMode(display=False)
                self.mode.__enter__()
            elif self.mode is not None and step_no == self.at_step + 1:
                mode, self.mode = self.mode, None
                mode.__exit__(None, None, None)
                self.flops = float(mode.get_total_flops())
                self.rec.default_flops = self.flops
                self.rec.on_step.remove(self)
        except Exception:
            self.rec.errors += 1
            self.mode = None
            if self in self.rec.on_step:
                self.rec.on_step.remove(self)
