"""Collectives by who calls them (the agent's ``comm_by``: DDP's hook, FSDP, a
ZeroRedundancyOptimizer, DeepSpeed, a framework, or a function of the job's own loop), per
step over the typical rank's steps, and the levers that fit each caller: a ZeRO optimizer's
broadcasts are overlapped through DDP's hook, a loop's own calls are flattened or made
asynchronous; a wrapper's own knobs are the comms bound's (``levers.wrapper_levers``). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputop.diagnose.lever import Lever
from gputop.model.steps import StepRecord
from gputop.vocab.setup import DDP, DEEPSPEED, FSDP1, FSDP2

WRAPPERS = {"DDP": (DDP,), "FSDP": (FSDP1, FSDP2), "DeepSpeed": (DEEPSPEED,)}
"""A caller that is the job's parallel wrapper: its levers are the wrapper's own."""
ZERO = "ZeroRedundancyOptimizer"


@dataclass(frozen=True)
class Caller:
    """One caller's collectives, per step on average."""

    name: str
    mb: float
    ms: float
    """Time its calls were outstanding (issue to completion as the host sees it), summed."""
    calls: float


def by_caller(steps: Sequence[StepRecord]) -> list[Caller]:
    """Each caller's bytes, time and calls per step over ``steps``, the costliest first (time
    outstanding, then bytes); empty when no step says who called (an older agent)."""
    told = [s for s in steps if s.comm_by]
    if not told:
        return []
    sums: dict[str, list[float]] = {}
    for s in told:
        for name, (b, ns, calls) in s.comm_by.items():
            acc = sums.setdefault(name, [0.0, 0.0, 0.0])
            acc[0], acc[1], acc[2] = acc[0] + b, acc[1] + ns, acc[2] + calls
    n = len(steps)
    out = [Caller(k, v[0] / n / 1e6, v[1] / n / 1e6, v[2] / n) for k, v in sums.items()]
    return sorted(out, key=lambda c: (-c.ms, -c.mb))


def callers_text(callers: Sequence[Caller], timed: bool) -> str:
    """ "ZeroRedundancyOptimizer 12.0 MB in 4 calls, 30 ms outstanding; DDP 5.3 MB ..." (the
    time left out where the host does not see completions: NCCL)."""
    parts = []
    for c in callers[:3]:
        ms = f", {c.ms:.0f} ms outstanding" if timed else ""
        parts.append(
            f"{c.name} {c.mb:,.1f} MB in {c.calls:.0f} call{'s' if c.calls >= 1.5 else ''}{ms}"
        )
    return "; ".join(parts)


def caller_levers(c: Caller, wrapper: str | None) -> tuple[Lever, ...]:
    """The levers that fit the costliest caller; none for the job's own wrapper (its knobs
    are the bound's levers) or a framework's internals."""
    if c.name in WRAPPERS:
        return ()
    if c.name == ZERO:
        fits = {DDP} if wrapper == DDP else set()
        return (
            Lever("ZeroRedundancyOptimizer(overlap_with_ddp=True) with DDP's ddp_zero_hook: "
                  "its parameter broadcasts overlap the next backward instead of following "
                  "step()", setups=fits),
        )  # fmt: skip
    if ":" in c.name:  # the job's own function
        fn = c.name.rsplit(":", 1)[-1]
        return (
            Lever(f"{fn} calls the collectives itself ({c.calls:.0f} a step): one call over "
                  "a flattened buffer, not one per tensor; async_op=True and wait only where "
                  "the result is needed, or every N steps"),
        )  # fmt: skip
    return ()
