"""An oracle kept apart from the code it checks: each setup's own knobs, as a lever would
spell them. A lever offered to a job that names a knob of a wrapper, backend or framework the
job does not have is wrong whatever the lever declared (``diagnose/lever_fit.py`` filters on the
declarations; the unit tests and the verdict bench check the texts against this table)."""

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
BACKEND_KNOBS: dict[str, tuple[str, ...]] = {"nccl": ("NCCL_", "NCCL flight recorder")}
FRAMEWORK_KNOBS: dict[str, tuple[str, ...]] = {
    LIGHTNING: ("val_check_interval", "check_val_every_n_epoch", "log_every_n_steps"),
    TRANSFORMERS: ("eval_steps", "logging_steps", "save_steps"),
}


def _kind(setup: Mapping[str, Any] | None, section: str, key: str = "kind") -> object:
    part = (setup or {}).get(section)
    return part.get(key) if isinstance(part, Mapping) else None


def names_a_missing_knob(lever: str, setup: Mapping[str, Any] | None) -> bool:
    """True when the text turns a knob of a wrapper, backend or framework the job lacks."""
    for table, have in (
        (PARALLEL_KNOBS, _kind(setup, "parallel")),
        (BACKEND_KNOBS, _kind(setup, "parallel", "backend")),
        (FRAMEWORK_KNOBS, _kind(setup, "framework")),
    ):
        for kind, knobs in table.items():
            if kind != have and any(k in lever for k in knobs):
                return True
    return False
