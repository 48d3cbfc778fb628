"""The job's setup, read from its live objects: how it is parallelised (DDP and its settings,
FSDP1 or FSDP2 and how it shards, DeepSpeed and its ZeRO stage, or collectives it calls itself)
and which framework drives the loop (a Lightning or transformers Trainer, accelerate) with the
settings a lever may name. Standard library only: every object is read by attribute, defensively
(a setting a version lacks is left out), and nothing here imports torch or a framework.

Where the objects are found, without a hook in the job's code:
- the parallel wrapper is the outermost module the training thread calls (``auto.py`` notes
  it at each new root, ``note_root``: a weak reference, nothing kept alive);
- a framework's trainer is ``self`` in one of the training thread's frames (its fit loop runs
  there), read from the agent thread with ``sys._current_frames()`` at most every few seconds;
- accelerate keeps its state in a class attribute (``AcceleratorState._shared_state``).
The agent sends it in its fingerprint (``parallel``, ``framework``): flat names and scalars.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterable
from types import FrameType
from typing import Any

from ..vocab import setup as vocab

MIB = 1 << 20
MAX_FRAMES = 200
"""Frames of the training thread looked at, innermost first."""

_root: list[Any] = []
"""A weak reference to the training thread's latest outermost module (at most one)."""


def note_root(module: Any) -> None:
    """From the forward hook, at an outermost module call: remember it (weakly), and read a
    new root's wrapper at once (a few attribute reads, once per new root: a short job may end
    before the agent thread looks, and its model is freed by then)."""
    try:
        if not _root or _root[0]() is not module:
            _root[:] = [weakref.ref(module)]
            kept("parallel", parallel_of(module))
    except TypeError:  # an object that takes no weak reference: nothing to read later
        _root[:] = []


def root() -> Any:
    return _root[0]() if _root else None


_known: dict[str, dict[str, Any]] = {}
"""The last setup read that said something, per part: a job tearing down (its model freed,
its process group destroyed, its trainer's frames gone) does not undo what it was."""


_WEAKER = {vocab.NONE: 0, vocab.DIRECT: 1}
"""How little a parallel reading says: no wrapper and no group, a group and no wrapper; a
wrapper says most. A job whose outermost module is sometimes a plain one (its evaluation
model) is still the wrapper's job."""


def _says(reading: dict[str, Any] | None) -> int:
    return _WEAKER.get(str(reading.get("kind")), 2) if reading else -1


def kept(part: str, reading: dict[str, Any]) -> dict[str, Any]:
    """``reading`` of ``part`` ("parallel", "framework"), unless it says less than the last
    one that said something (nothing found; no wrapper where one was seen)."""
    new, old = _says(reading), _says(_known.get(part))
    if new > old or (new == old and new > 0):
        _known[part] = reading
    return dict(_known.get(part, reading))


def _get(obj: Any, *names: str) -> Any:
    """``obj.a.b...`` or None, never raising (a property of another version may)."""
    for name in names:
        try:
            obj = getattr(obj, name)
        except Exception:
            return None
    return obj


def _plain(value: Any) -> Any:
    """A setting as the wire carries it: bool, int, float, short str, None; an enum by name."""
    if value is None or isinstance(value, bool | int | float):
        return value
    name = getattr(value, "name", None)
    if isinstance(name, str):
        return name
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _settings(obj: Any, *names: str) -> dict[str, Any]:
    """Each named attribute of ``obj`` as the wire carries it (None where it has none)."""
    return {name: _plain(_get(obj, name)) for name in names}


def _classes(obj: Any) -> set[tuple[str, str]]:
    """(top-level package, class name) of each class ``obj`` is an instance of: a wrapper is
    known by its name within its package, wherever a version of it defines or re-exports it
    (FSDP2's ``FSDPModule`` says ``torch.distributed.fsdp``, older ones ``..._composable``)."""
    return {(c.__module__.split(".", 1)[0], c.__qualname__) for c in type(obj).__mro__}


DDP = ("torch", "DistributedDataParallel")
FSDP1 = ("torch", "FullyShardedDataParallel")
FSDP2 = ("torch", "FSDPModule")
DEEPSPEED = ("deepspeed", "DeepSpeedEngine")


def parallel_of(module: Any, group: bool = False) -> dict[str, Any]:
    """How the outermost module is parallelised. ``group``: torch.distributed has a process
    group (with no wrapper, the loop's own collectives are what communicates)."""
    if module is None:
        return {"kind": vocab.DIRECT} if group else {}
    names = _classes(module)
    if DDP in names:
        cap = _get(module, "bucket_bytes_cap")
        return {
            "kind": vocab.DDP,
            "bucket_cap_mb": round(cap / MIB, 1) if isinstance(cap, int | float) else None,
            **_settings(module, "gradient_as_bucket_view", "static_graph",
                        "find_unused_parameters", "broadcast_buffers"),
        }  # fmt: skip
    if FSDP1 in names:
        return {
            "kind": vocab.FSDP1,
            **_settings(
                module,
                "sharding_strategy",
                "backward_prefetch",
                "forward_prefetch",
                "limit_all_gathers",
            ),
            "use_orig_params": _plain(_get(module, "_use_orig_params")),
        }
    if FSDP2 in names:
        return {"kind": vocab.FSDP2, **_fsdp2(module)}
    if DEEPSPEED in names:
        return {"kind": vocab.DEEPSPEED, **_deepspeed(module)}
    return {"kind": vocab.DIRECT if group else vocab.NONE}


FSDP2_LOOKED_AT = 64
"""Submodules looked at for an FSDP2 parameter group below the root (a model's first layers)."""


def _fsdp2_group(module: Any) -> Any:
    """The parameter group of the first module below the root that ``fully_shard`` wrapped
    (FSDP2 keeps the root's parameters unsharded after forward whatever was asked, so the
    layers' group says what the user chose), else the root's own."""
    for i, sub in enumerate(module.modules()):
        if i >= FSDP2_LOOKED_AT:
            break
        state = getattr(sub, "_get_fsdp_state", None)
        group = _get(state(), "_fsdp_param_group") if i and callable(state) else None
        if group is not None:
            return group
    return module._get_fsdp_state()._fsdp_param_group


def _fsdp2(module: Any) -> dict[str, Any]:
    """FSDP2's settings from its parameter group (private, read defensively): how many ranks
    shard (and replicate, HSDP), and what ``reshard_after_forward`` became: False (kept
    unsharded until backward), True, or the size of the smaller group it reshards to."""
    out: dict[str, Any] = {}
    try:
        group = _fsdp2_group(module)
    except Exception:
        return out
    if group is None:
        return out
    mesh = _get(group, "mesh_info")
    shard = _get(mesh, "shard_mesh_size")
    replicate = _get(mesh, "replicate_mesh_size")
    out["shard_size"] = shard if isinstance(shard, int) else None
    out["hsdp"] = isinstance(replicate, int) and replicate > 1
    if out["hsdp"]:
        out["replicate_size"] = replicate
    post = _get(group, "post_forward_mesh_info")
    if post is None:
        out["reshard_after_forward"] = False
    else:
        size = _get(post, "shard_mesh_size")
        out["reshard_after_forward"] = True if size == shard else _plain(size)
    return out


def _deepspeed(engine: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, method in (
        ("zero_stage", "zero_optimization_stage"),
        ("overlap_comm", "zero_overlap_comm"),
        ("reduce_bucket_size", "zero_reduce_bucket_size"),
        ("contiguous_gradients", "zero_contiguous_gradients"),
    ):
        call = _get(engine, method)
        try:
            out[key] = _plain(call()) if callable(call) else None
        except Exception:
            out[key] = None
    return out


# ---- the framework, from the training thread's frames ---------------------------------------

LIGHTNING_FILES = ("lightning/pytorch/", "pytorch_lightning/")
TRANSFORMERS_FILE = "transformers/trainer.py"


def frames_of(thread_id: int | None) -> list[FrameType]:
    """The thread's frames, innermost first (at most MAX_FRAMES)."""
    if thread_id is None:
        return []
    frame = sys._current_frames().get(thread_id)
    out: list[FrameType] = []
    while frame is not None and len(out) < MAX_FRAMES:
        out.append(frame)
        frame = frame.f_back
    return out


def _self_in(frames: Iterable[FrameType], paths: tuple[str, ...]) -> Any:
    for f in frames:
        name = f.f_code.co_filename.replace("\\", "/")
        if any(p in name for p in paths):
            try:
                me = f.f_locals.get("self")
            except Exception:
                continue
            if me is not None:
                return me
    return None


def framework_of(frames: list[FrameType]) -> dict[str, Any]:
    """The trainer that drives the loop, and the settings that decide its side costs."""
    hf = _self_in(frames, (TRANSFORMERS_FILE,))
    if hf is not None and _get(hf, "args") is not None:
        a = _get(hf, "args")
        strategy = _get(a, "eval_strategy")
        if strategy is None:
            strategy = _get(a, "evaluation_strategy")
        return {
            "kind": vocab.TRANSFORMERS,
            "eval_strategy": _plain(strategy),
            **_settings(
                a,
                "eval_steps",
                "logging_steps",
                "save_strategy",
                "save_steps",
                "gradient_accumulation_steps",
                "dataloader_num_workers",
            ),
        }
    me = _self_in(frames, LIGHTNING_FILES)
    trainer = me if _get(me, "fit_loop") is not None else _get(me, "trainer")
    if trainer is not None and _get(trainer, "fit_loop") is not None:
        return {
            "kind": vocab.LIGHTNING,
            **_settings(
                trainer,
                "val_check_interval",
                "check_val_every_n_epoch",
                "log_every_n_steps",
                "accumulate_grad_batches",
                "precision",
            ),
            "strategy": type(_get(trainer, "strategy")).__name__,
        }
    state = _accelerate_state()
    if state:
        return {"kind": vocab.ACCELERATE, **state}
    return {}


def _accelerate_state() -> dict[str, Any]:
    module = sys.modules.get("accelerate.state")
    shared = _get(_get(module, "AcceleratorState"), "_shared_state")
    if not isinstance(shared, dict) or not shared:
        return {}
    return {
        "distributed_type": _plain(shared.get("distributed_type")),
        "mixed_precision": _plain(shared.get("_mixed_precision")),
        "num_processes": _plain(shared.get("num_processes")),
    }
