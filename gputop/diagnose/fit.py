"""Which levers fit the job's setup: a knob belongs to the setup whose API it is (DDP's
``bucket_cap_mb``, FSDP2's ``fully_shard``, DeepSpeed's ``overlap_comm``, NCCL's variables,
Lightning's ``val_check_interval``, the transformers Trainer's ``eval_steps``), and a lever
that turns a knob of a setup the job does not have is never offered (a DDP knob for an FSDP
job is a wrong answer, like a wrong verdict). Pure: the setup document (``model/setup.py``) in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputop.vocab.setup import DDP, DEEPSPEED, FSDP1, FSDP2, LIGHTNING, TRANSFORMERS

PARALLEL_KNOBS: dict[str, tuple[str, ...]] = {
    DDP: ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "no_sync()"),
    FSDP2: ("fully_shard(", "set_modules_to_", "set_requires_gradient_sync"),
    FSDP1: ("sharding_strategy", "backward_prefetch=", "forward_prefetch="),
    DEEPSPEED: ("overlap_comm", "reduce_bucket_size", "zero_optimization"),
}
"""Each parallel wrapper's own knobs, as the levers spell them."""
BACKEND_KNOBS: dict[str, tuple[str, ...]] = {"nccl": ("NCCL_", "NCCL flight recorder")}
"""A process group backend's own knobs."""
FRAMEWORK_KNOBS: dict[str, tuple[str, ...]] = {
    LIGHTNING: ("val_check_interval", "check_val_every_n_epoch", "log_every_n_steps"),
    TRANSFORMERS: ("eval_steps", "logging_steps", "save_steps"),
}
"""Each framework's own settings."""


def _kind(setup: Mapping[str, Any] | None, section: str, key: str = "kind") -> object:
    part = (setup or {}).get(section)
    return part.get(key) if isinstance(part, Mapping) else None


def fits(lever: str, setup: Mapping[str, Any] | None) -> bool:
    """False when the lever turns a knob of a wrapper, backend or framework the job lacks
    (an unknown setup has none of them)."""
    for table, have in (
        (PARALLEL_KNOBS, _kind(setup, "parallel")),
        (BACKEND_KNOBS, _kind(setup, "parallel", "backend")),
        (FRAMEWORK_KNOBS, _kind(setup, "framework")),
    ):
        for kind, knobs in table.items():
            if kind != have and any(k in lever for k in knobs):
                return False
    return True
