"""The job's setup as its agent read it (``gputop/agent/setup.py`` and the fingerprint): what a
lever may name and what decides which levers fit. Pure: the main rank's fingerprint in, one
plain document out, the same for the why screen, ``diagnose --json`` (``setup``) and the
levers (``diagnose/bound_levers.py`` offers a wrapper's knobs only to a job that has that wrapper).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputop.vocab.setup import FRAMEWORKS, PARALLEL_KINDS


def _section(value: object) -> dict[str, Any] | None:
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) and value else None


def _kinded(value: object, kinds: tuple[str, ...]) -> dict[str, Any] | None:
    """A section whose ``kind`` is one gputop knows (the wire is untrusted: anything else is
    not a setup the levers or the schema can speak of)."""
    section = _section(value)
    return section if section is not None and section.get("kind") in kinds else None


def setup_of(fingerprint: Mapping[str, object] | None) -> dict[str, Any] | None:
    """The setup document (None: no agent has said anything yet). Sections the agent could not
    read (an older agent, torch not imported yet) are None, never guessed."""
    if not fingerprint:
        return None
    fp = fingerprint
    return {
        "parallel": _kinded(fp.get("parallel"), PARALLEL_KINDS),
        "framework": _kinded(fp.get("framework"), FRAMEWORKS),
        "dataloader": _section(fp.get("dataloader")),
        "compiled": fp.get("compiled") if isinstance(fp.get("compiled"), bool) else None,
        "autocast_dtype": fp.get("autocast_dtype") if fp.get("autocast") else None,
        "torch_threads": fp.get("intra_op_threads"),
        "interop_threads": fp.get("interop_threads"),
        "torch": fp.get("torch"),
    }


def parallel_kind(fingerprint: Mapping[str, object] | None) -> str | None:
    """DDP, FSDP1, FSDP2, DeepSpeed, collectives, none; None while unknown."""
    section = _kinded((fingerprint or {}).get("parallel"), PARALLEL_KINDS)
    return section["kind"] if section else None


def loader_setting(fingerprint: Mapping[str, object] | None, name: str) -> object:
    """The training DataLoader's setting ``name`` as the agent read it (None: not known)."""
    section = _section((fingerprint or {}).get("dataloader")) or {}
    return section.get(name)


def loader_workers(fingerprint: Mapping[str, object] | None) -> int | None:
    """The training DataLoader's ``num_workers`` when the agent read a count, else None."""
    n = loader_setting(fingerprint, "num_workers")
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None


def parallel_setting(fingerprint: Mapping[str, object] | None, name: str) -> object:
    section = _section((fingerprint or {}).get("parallel")) or {}
    return section.get(name)
