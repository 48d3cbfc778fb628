"""The names of a job's parallel setups, as the agent reports them (``agent/setup.py``) and the
levers read them (``model/setup.py``). Standard library only: the agent imports it."""

from __future__ import annotations

DDP = "DDP"
FSDP1 = "FSDP1"
FSDP2 = "FSDP2"
DEEPSPEED = "DeepSpeed"
DIRECT = "collectives"
"""A process group and no wrapper: the loop calls torch.distributed's collectives itself."""
NONE = "none"
"""The outermost module is a plain module and there is no process group."""
PARALLEL_KINDS = (DDP, FSDP1, FSDP2, DEEPSPEED, DIRECT, NONE)

HOST_BLIND_BACKENDS = frozenset({"nccl"})
"""Process group backends whose collectives complete on the GPU, where the host does not see
them: their futures complete at enqueue, so the agent does not time them to completion and the
comms cause says nothing of what hid behind compute."""

LIGHTNING = "lightning.Trainer"
TRANSFORMERS = "transformers.Trainer"
ACCELERATE = "accelerate"
FRAMEWORKS = (LIGHTNING, TRANSFORMERS, ACCELERATE)
