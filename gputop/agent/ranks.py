"""Which rank this process is: from torch.distributed once its process group is up (the only
source for ``torch.multiprocessing.spawn`` children, which carry no rank variable), else from
the launcher's environment (torchrun/elastic, accelerate, DeepSpeed and Lightning set RANK;
SLURM ``srun``; Open MPI ``mpirun``), so a rank is known before the group exists.

Sent in the hello (``agent.ranks``, docs/agent-wire.md); the agent thread polls ``current()``
and sends a new hello when it changes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

RANKS_VERSION = 1
LAUNCHER_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_SIZE",
)
LAUNCHERS = (  # (source, rank, local rank, world size), first match wins
    ("env", "RANK", "LOCAL_RANK", "WORLD_SIZE"),
    ("slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
    ("ompi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),
)
SOURCES = ("torch.distributed", *(s for s, *_ in LAUNCHERS))


def _int(v: str | None) -> int | None:
    return int(v) if v is not None and v.strip().isdigit() and len(v) < 10 else None


def launcher_env(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """The launcher rank variables set in this process, as integers."""
    env = os.environ if env is None else env
    out = {}
    for k in LAUNCHER_VARS:
        v = _int(env.get(k))
        if v is not None:
            out[k] = v
    return out


def from_dist() -> dict[str, Any] | None:
    """rank, world_size and backend of the default process group once it is initialised."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        return {
            "rank": int(dist.get_rank()),
            "world_size": int(dist.get_world_size()),
            "backend": str(dist.get_backend())[:32],
        }
    except Exception:
        return None


def current(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``ranks`` object of the hello: v, source, rank, local_rank, world_size, dist and
    launcher (the variables seen)."""
    launcher = launcher_env(env)
    dist = from_dist()
    rank = local = world = source = None
    for name, r, lr, ws in LAUNCHERS:
        if r in launcher:
            source, rank, local, world = name, launcher[r], launcher.get(lr), launcher.get(ws)
            break
    if dist is not None:
        source, rank, world = "torch.distributed", dist["rank"], dist["world_size"]
    return {
        "v": RANKS_VERSION,
        "source": source,
        "rank": rank,
        "local_rank": local,
        "world_size": world,
        "dist": dist,
        "launcher": launcher,
    }
