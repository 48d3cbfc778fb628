"""Which levers fit the job's setup: a lever declares the setups whose knob it turns
(``Lever.setups``: DDP's ``bucket_cap_mb`` belongs to DDP, NCCL's variables to NCCL,
Lightning's ``val_check_interval`` to Lightning), and one whose setups the job does not have
is never offered (a DDP knob for an FSDP job is a wrong answer, like a wrong verdict). An
unknown setup has none of them. Pure: the setup document (``model/setup.py``) in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputop.diagnose.lever import Lever
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.setup import setup_of


def _part(setup: Mapping[str, Any] | None, section: str, key: str) -> object:
    part = (setup or {}).get(section)
    return part.get(key) if isinstance(part, Mapping) else None


def setups_of(setup: Mapping[str, Any] | None) -> frozenset[str]:
    """What the job has, in the words levers declare: its parallel wrapper, the process
    group's backend and its framework."""
    have = (
        _part(setup, "parallel", "kind"),
        _part(setup, "parallel", "backend"),
        _part(setup, "framework", "kind"),
    )
    return frozenset(x for x in have if isinstance(x, str))


def fits(lever: str, setup: Mapping[str, Any] | None) -> bool:
    """True unless the lever belongs to setups the job has none of (a plain text, read back
    from a recording, declares none)."""
    if not isinstance(lever, Lever) or not lever.setups:
        return True
    return bool(lever.setups & setups_of(setup))


def fitting(levers: tuple[str, ...], sig: RuleInputs) -> tuple[str, ...]:
    """The levers that fit the setup the job's agents reported (none of a wrapper, backend or
    framework while it is unknown)."""
    setup = setup_of(sig.steps.fingerprint if sig.steps is not None else None)
    return tuple(x for x in levers if fits(x, setup))
