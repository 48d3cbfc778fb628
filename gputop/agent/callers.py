"""Who issues a collective: the code that called ``torch.distributed``'s function, named by
what it belongs to (DDP's reducer hooks, FSDP, ``ZeroRedundancyOptimizer``, DeepSpeed, a
framework) or, for the job's own loop, by its file and function. The agent attributes each
outermost collective's bytes and time to it (``auto._counted``), so the comms cause can name
the caller that costs most. A caller's code object is classified once (a dict lookup a call
after that). Standard library only: this runs inside the job."""

from __future__ import annotations

import sys
from types import CodeType, FrameType

OWNERS: tuple[tuple[str, str], ...] = (
    ("torch/distributed/fsdp/", "FSDP"),
    ("torch/distributed/optim/zero_redundancy_optimizer", "ZeroRedundancyOptimizer"),
    ("torch/distributed/algorithms/ddp_comm_hooks/", "DDP"),
    ("torch/nn/parallel/distributed.py", "DDP"),
    ("deepspeed/", "DeepSpeed"),
    ("torch/distributed/checkpoint/", "torch.distributed.checkpoint"),
    ("accelerate/", "accelerate"),
    ("lightning/", "Lightning"),
    ("pytorch_lightning/", "Lightning"),
    ("transformers/", "transformers"),
)
"""Path parts -> the owner a collective called from there is attributed to."""
PASS_THROUGH = ("torch/distributed/", "gputop", "functools.py", "contextlib.py")
"""Frames that only carry a call on (c10d's helpers, wrappers): the caller is above them."""
MAX_UP = 8
"""Frames walked up at most to find the caller."""
MAX_CODES = 4096

_KNOWN: dict[int, tuple[CodeType, str | None]] = {}
"""id(code) -> (code, its owner label, None for a pass-through frame)."""


def _short(path: str) -> str:
    """The path from its package on: ``.../site-packages/torch/x.py`` -> ``torch/x.py``; a
    script by its base name."""
    for marker in ("site-packages/", "dist-packages/"):
        i = path.rfind(marker)
        if i >= 0:
            return path[i + len(marker) :]
    return path.rsplit("/", 1)[-1]


def _classify(code: CodeType) -> str | None:
    path = code.co_filename.replace("\\", "/")
    for part, owner in OWNERS:
        if part in path:
            return owner
    if any(p in path for p in PASS_THROUGH):
        return None
    name = getattr(code, "co_qualname", code.co_name)
    return f"{_short(path)}:{name}"


def caller(depth: int = 2) -> str:
    """The owner of the code that called the collective ``depth`` frames up."""
    try:
        f: FrameType | None = sys._getframe(depth)
    except ValueError:
        return "?"
    first: str | None = None
    for _ in range(MAX_UP):
        if f is None:
            break
        code = f.f_code
        known = _KNOWN.get(id(code))
        if known is None or known[0] is not code:
            if len(_KNOWN) >= MAX_CODES:
                _KNOWN.clear()
            known = _KNOWN[id(code)] = (code, _classify(code))
        if known[1] is not None:
            return known[1]
        if first is None:
            first = f"{_short(code.co_filename)}:{code.co_name}"
        f = f.f_back
    return first or "?"
