"""Why host-to-device copies hold the step: whether the batches come from pinned memory (the
loader's ``pin_memory``, read from the live job), which decides whether a copy can run
beside compute at all. Pure."""

from __future__ import annotations

from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.model.setup import loader_setting
from gputop.vocab import budget as slices

SLICE = slices.H2D


def find(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """None while the loader's setting is not known (no agent, no DataLoader)."""
    fp = sig.steps.fingerprint if sig.steps is not None else None
    pinned = loader_setting(fp, "pin_memory")
    if not isinstance(pinned, bool):
        return None
    took = ""
    if budget is not None and budget.typical.steps:
        r = budget.typical
        took = f" ({budget.share(SLICE) * r.seconds / r.steps * 1000:.0f} ms a step)"
    said = Evidence(f"DataLoader pin_memory={pinned} (read from the live job)", "agent")
    if not pinned:
        return Cause(
            f"the batches are copied from pageable memory (pin_memory=False){took}: each copy "
            "is staged through a bounce buffer and the step waits for it",
            (said,),
            ("DataLoader(pin_memory=True) and .to(device, non_blocking=True): both halves",),
        )
    return Cause(
        f"the batches are pinned (pin_memory=True) and the step still waits for their copies"
        f"{took}: the copies do not overlap compute",
        (said,),
        (".to(device, non_blocking=True), and copy the next batch on a side CUDA stream "
         "while this one computes",),
    )  # fmt: skip
