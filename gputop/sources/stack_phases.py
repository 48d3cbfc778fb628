"""The one table that maps a Python stack to a training phase. Easy to read, easy to extend.

Rules are tried in order (their order is their priority); the first rule that matches any
frame wins, and the innermost frame it matches is kept as the evidence. A rule is (phase,
file suffix, function name); ``*`` matches anything, ``x*`` a prefix and ``*x`` a suffix.
Frame names are from real torch 2.x dumps (docs/facts/capture.md, "Torch frame names").
Priority matters where stacks nest: a DataLoader worker carries its parent's frames below its own, a
torchvision transform is an nn.Module called inside the loader, a collective runs inside
backward hooks, and recomputation under activation checkpointing is a forward inside
backward; so loader rules come first, then waits, then backward before forward.

An evaluation pass (the "evaluation" row) is found by what the user wrote rather than by a
torch file: a function of theirs decorated with ``@torch.no_grad()`` or
``@torch.inference_mode()`` (torch runs it through ``decorate_context`` in
``torch/utils/_contextlib.py``: the frame inside it is the decorated function), or a function
of theirs whose name says eval, valid or test (``evaluate``, ``run_validation``,
``val_step``...). It ranks after the checkpoint rows and before the data wait: an eval pass
runs forwards and waits for its own batches, and that time is the eval's, not training's.
Torch's own decorated functions (FSDP's unshard under forward) are not evaluations, nor are
functions of pytest modules (``test_*.py``: a test named test_... is not an eval pass).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

from gputop.model.stacks import Frame, ThreadStack
from gputop.vocab.stacks import LOCK_LEAVES, STACK_DEPTH, WAIT_LEAVES

RULES: tuple[tuple[str, str, str], ...] = (
    # DataLoader worker processes and the pin-memory thread
    ("fetch/transform", "torch/utils/data/_utils/fetch.py", "*Fetcher.fetch"),
    ("worker idle", "torch/utils/data/_utils/worker.py", "_worker_loop"),
    ("pin memory", "torch/utils/data/_utils/pin_memory.py", "*"),
    # collectives and explicit syncs (before forward/backward: they happen inside them)
    ("collective wait", "torch/distributed/distributed_c10d.py", "*"),
    ("collective wait", "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py", "*"),
    (
        "collective wait",
        "torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py",
        "FSDPParamGroup.wait_for_unshard",
    ),
    ("host sync", "torch/cuda/__init__.py", "synchronize"),
    ("host sync", "torch/cuda/streams.py", "*synchronize"),
    # side work
    ("checkpoint save", "torch/serialization.py", "save"),
    ("checkpoint save", "torch/serialization.py", "_save"),
    ("checkpoint save", "torch/distributed/checkpoint/state_dict_saver.py", "*"),
    ("evaluation", "<user code>", "<eval pass>"),  # _evaluation(): see the module docstring
    # the step
    ("data wait", "torch/utils/data/dataloader.py", "*"),
    ("backward", "torch/autograd/graph.py", "_engine_run_backward"),
    ("backward", "torch/autograd/__init__.py", "backward"),
    ("backward", "torch/autograd/__init__.py", "grad"),
    ("optimizer", "torch/optim/optimizer.py", "*"),
    ("optimizer", "torch/amp/grad_scaler.py", "*"),
    ("optimizer", "torch/nn/utils/clip_grad.py", "*"),
    ("forward", "torch/nn/parallel/distributed.py", "DistributedDataParallel.forward"),
    ("forward", "torch/nn/modules/module.py", "Module._call_impl"),
    ("logging", "torch/utils/tensorboard/*", "*"),
    ("logging", "wandb/*", "*"),
    ("logging", "logging/__init__.py", "*"),
)


def _match(pattern: str, value: str) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    if pattern.startswith("*"):
        return value.endswith(pattern[1:])
    return value == pattern


def _file_match(pattern: str, file: str) -> bool:
    if pattern.endswith("/*"):
        return file.startswith(pattern[:-1]) or f"/{pattern[:-1]}" in file
    return file == pattern or file.endswith("/" + pattern)


def _any(leaves: tuple[tuple[str, str], ...], frame: Frame) -> bool:
    return any(_file_match(f, frame.file) and _match(n, frame.name) for f, n in leaves)


EVAL_WORDS = frozenset({"eval", "evaluate", "evaluation", "evaluating", "validate", "validation",
                        "validating", "test", "testing"})  # fmt: skip
"""Words of a function name (split at underscores and case changes) that make it an eval pass;
"val" counts as the first word only (val_step, not max_val)."""
TRAIN_WORDS = frozenset({"train", "training", "fit"})
"""Words that make it training: the innermost user function named so wins (train_step inside
train_and_evaluate is training, and so is train_and_evaluate itself)."""
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_LIBRARIES = ("torch/", "site-packages/", "dist-packages/", "<")


def _users(frame: Frame) -> bool:
    """A frame of the user's own code: not torch, not an installed library, not a pytest module."""
    f = frame.file
    if f.startswith(_LIBRARIES) or any(f"/{lib}" in f for lib in _LIBRARIES[:3]):
        return False
    base = f.rsplit("/", 1)[-1]
    if base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py":
        return False
    top = f.split("/", 1)[0].removesuffix(".py")
    return top not in sys.stdlib_module_names


def _evaluation(frames: Sequence[Frame]) -> Frame | None:
    """The frame that shows an eval pass (innermost first), or None (module docstring)."""
    for i, frame in enumerate(frames):
        if (
            i > 0
            and frame.name == "decorate_context"
            and _file_match("torch/utils/_contextlib.py", frame.file)
            and _users(frames[i - 1])
        ):
            return frames[i - 1]
        if not _users(frame):
            continue
        words = [w.lower() for w in _WORDS.findall(frame.name.rsplit(".", 1)[-1])]
        if TRAIN_WORDS.intersection(words):
            return None
        if EVAL_WORDS.intersection(words) or words[:1] == ["val"]:
            return frame
    return None


CACHE_MAX = 8192
"""Entries kept in each of the two caches below before they start again."""
_FRAMES: dict[tuple[str, str, int | None, str], Frame] = {}
_DECIDED: dict[tuple[bool, tuple[tuple[str, str], ...]], tuple[str, int | None]] = {}


def _frame(name: str, file: str, line: int | None, code: str = "") -> Frame:
    """One Frame object per (name, file, line, code) seen: stacks that repeat compare by
    identity."""
    key = (name, file, line, code)
    frame = _FRAMES.get(key)
    if frame is None:
        if len(_FRAMES) >= CACHE_MAX:
            _FRAMES.clear()
        frame = _FRAMES[key] = Frame(name, file, line, code)
    return frame


RawFrame = tuple[str, str, int | None] | tuple[str, str, int | None, str]
"""(name, file, line) as a reader gives a frame, with its source line where it read one."""


def thread_stack(tid: int, name: str, active: bool, frames: Sequence[RawFrame]) -> ThreadStack:
    """A thread's stack, whoever read it (py-spy or the agent): its frames (innermost first,
    cut to STACK_DEPTH) and its phase by ``classify``."""
    kept = tuple(_frame(*f) for f in frames[:STACK_DEPTH])
    phase, deciding = classify(kept, active)
    return ThreadStack(tid=tid, name=name, active=active, frames=kept, phase=phase,
                       deciding=deciding)  # fmt: skip


def classify(frames: Sequence[Frame], active: bool) -> tuple[str, Frame | None]:
    """(phase, deciding frame), by ``decide``; remembered by the frames' names and files (a
    training loop's stacks repeat: the rules run once per distinct stack, not per sample)."""
    key = (active, tuple((f.name, f.file) for f in frames))
    known = _DECIDED.get(key)
    if known is None:
        phase, deciding = decide(frames, active)
        at = None
        if deciding is not None:
            at = next(i for i, f in enumerate(frames) if f is deciding)
        if len(_DECIDED) >= CACHE_MAX:
            _DECIDED.clear()
        known = _DECIDED[key] = (phase, at)
    phase, at = known
    return phase, (frames[at] if at is not None else None)


THREADING = "threading.py"
"""A thread with only these frames is being started or ended (``Thread._bootstrap``,
``_set_ident``, ...): seen attached to a Lightning job as "user code 100%"."""


def decide(frames: Sequence[Frame], active: bool) -> tuple[str, Frame | None]:
    """(phase, deciding frame). Frames innermost first.

    No training rule matched: "lock wait" or "blocked" (a queue, event, socket...) by the
    innermost frame; "idle" for any other thread py-spy saw as inactive (sleeping) or with
    only threading's own frames; else "user code", with the innermost frame as evidence."""
    for phase, file, name in RULES:
        if file == "<user code>":
            found = _evaluation(frames)
            if found is not None:
                return phase, found
            continue
        for frame in frames:
            if _file_match(file, frame.file) and _match(name, frame.name):
                return phase, frame
    if not frames:
        return "idle", None
    leaf = frames[0]
    if _any(LOCK_LEAVES, leaf):
        return "lock wait", leaf
    if _any(WAIT_LEAVES, leaf):
        return "blocked", leaf
    if not active or all(f.file == THREADING for f in frames):
        return "idle", leaf  # asleep, or a thread starting or ending: none of the job's code
    return "user code", leaf
