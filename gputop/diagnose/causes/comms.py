"""What the exposed communication wait is made of: the job's own wrapper and the settings
that decide its collectives (read live by the agent: ``model/setup.py``), the bytes the
step's collectives carry (the agent counts them: DDP's buckets, FSDP's gathers, a loop's own
all_reduce), how long they were outstanding (issue to completion) against the part the step
waited for (exposed), the rest hidden behind compute, and the rate the bytes moved at. Pure."""

from __future__ import annotations

import statistics

from gputop.diagnose.causes.callers import WRAPPERS, by_caller, caller_levers, callers_text
from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.model.setup import parallel_kind, parallel_setting
from gputop.vocab import budget as slices
from gputop.vocab.setup import DDP, DEEPSPEED, DIRECT, FSDP1, FSDP2, HOST_BLIND_BACKENDS

SLICE = slices.COMMS

MB = 1e6
WHO = {
    DDP: "DDP all-reduces its gradients",
    FSDP2: "FSDP2 gathers its parameters and reduces its gradients",
    FSDP1: "FSDP gathers its parameters and reduces its gradients",
    DEEPSPEED: "DeepSpeed reduces its gradients",
    DIRECT: "the loop's own collectives move",
}
"""How each setup's traffic is said."""
SETTINGS = {
    DDP: ("bucket_cap_mb", "gradient_as_bucket_view"),
    FSDP2: ("reshard_after_forward", "shard_size"),
    FSDP1: ("sharding_strategy", "backward_prefetch"),
    DEEPSPEED: ("zero_stage", "overlap_comm", "reduce_bucket_size"),
}
"""The settings that decide a wrapper's collectives, said beside its bytes."""


def find(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """None without the typical rank's steps or any bytes counted (an older agent, NCCL's
    own calls that bypass Python's collectives)."""
    st = sig.steps
    if budget is None or st is None:
        return None
    r = budget.typical
    rank = st.of(r.pid)
    recent = rank.recent if rank is not None else ()
    got = [s.comm_bytes for s in recent if s.comm_bytes]
    if not got or not r.steps or not r.seconds:
        return None
    per_step = statistics.median(got)
    step_ms = r.seconds / r.steps * 1000
    exposed_ms = budget.share(slices.COMMS) * step_ms
    fp = st.fingerprint
    kind = parallel_kind(fp)
    backend = parallel_setting(fp, "backend")
    flights = [s.comm_ns for s in recent if s.comm_ns]
    flight_ms = (
        statistics.median(flights) / 1e6 if flights and backend not in HOST_BLIND_BACKENDS else None
    )
    settings = ", ".join(
        f"{name}={parallel_setting(fp, name)}"
        for name in SETTINGS.get(kind or "", ())
        if parallel_setting(fp, name) is not None
    )
    who = WHO.get(kind or "", "the job's collectives move")
    over = f" over {backend}" if isinstance(backend, str) else ""
    text = f"{who}: {per_step / MB:,.1f} MB a step{over}"
    if settings:
        text += f" ({settings})"
    text += _timing(per_step, exposed_ms, flight_ms)
    said = f"{r.label}: collectives given {per_step / MB:,.1f} MB a step (median of {len(got)} "
    evidence = [Evidence(f"{said}steps), {exposed_ms:.0f} ms exposed", "agent")]
    if flight_ms is not None:
        evidence.append(
            Evidence(f"{r.label}: a collective outstanding {flight_ms:.0f} ms a step "
                     f"(median of {len(flights)} steps, issue to completion)", "agent")
        )  # fmt: skip
    callers = by_caller(recent)
    levers: tuple[str, ...] = ()
    if callers and (len(callers) > 1 or callers[0].name not in WRAPPERS):
        timed = backend not in HOST_BLIND_BACKENDS
        text += f"; by caller: {callers_text(callers, timed)}"
        evidence.append(Evidence(f"{r.label}: collectives by caller, a step: "
                                 f"{callers_text(callers, timed)}", "agent"))  # fmt: skip
        levers = caller_levers(callers[0], kind)
    return Cause(text, tuple(evidence), levers)


def _timing(per_step: float, exposed_ms: float, flight_ms: float | None) -> str:
    """The wait, and where the host saw the collectives complete, how long they were
    outstanding and how much of that hid behind compute; the rate is the bytes over the time
    they were outstanding (over the wait where that is not seen)."""
    moving = flight_ms if flight_ms else exposed_ms
    rate = f" ({per_step / MB / moving:.2f} GB/s)" if moving > 0 else ""  # MB/ms is GB/s
    if flight_ms is None:
        return f"; the step waits {exposed_ms:.0f} ms for them{rate}"
    if exposed_ms >= flight_ms:  # the wait holds all of it (and maybe more: the host, GIL)
        return f"; outstanding {flight_ms:.0f} ms a step{rate}, all of it waited for"
    hidden = 1.0 - exposed_ms / flight_ms
    return (
        f"; outstanding {flight_ms:.0f} ms a step{rate}, the step waits {exposed_ms:.0f} ms "
        f"of it: {hidden:.0%} hidden behind compute"
    )
