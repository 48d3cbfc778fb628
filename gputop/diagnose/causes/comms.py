"""What the exposed communication wait is made of: the job's own wrapper and the settings
that decide its collectives (read live by the agent: ``model/setup.py``), the bytes the
step's collectives carry (the agent counts them: DDP's buckets, FSDP's gathers, a loop's own
all_reduce), and the rate those bytes move at against the time the step waits for them.
Pure."""

from __future__ import annotations

import statistics

from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.signals import RuleInputs
from gputop.model.setup import parallel_kind, parallel_setting
from gputop.model.step_stats import usable
from gputop.vocab import budget as slices
from gputop.vocab.setup import DDP, DEEPSPEED, DIRECT, FSDP1, FSDP2

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


def comms_cause(sig: RuleInputs) -> Cause | None:
    """None without the typical rank's steps or any bytes counted (an older agent, NCCL's
    own calls that bypass Python's collectives)."""
    budget, st = sig.budget, sig.steps
    if budget is None or st is None:
        return None
    r = budget.typical
    agent = next((a for a in st.agents if a.pid == r.pid), None)
    got = [s.comm_bytes for s in usable(agent.steps) if s.comm_bytes] if agent else []
    if not got or not r.steps or not r.seconds:
        return None
    per_step = statistics.median(got)
    step_ms = r.seconds / r.steps * 1000
    exposed_ms = budget.share(slices.COMMS) * step_ms
    fp = st.fingerprint
    kind = parallel_kind(fp)
    backend = parallel_setting(fp, "backend")
    settings = ", ".join(
        f"{name}={parallel_setting(fp, name)}"
        for name in SETTINGS.get(kind or "", ())
        if parallel_setting(fp, name) is not None
    )
    who = WHO.get(kind or "", "the job's collectives move")
    over = f" over {backend}" if isinstance(backend, str) else ""
    rate = per_step / MB / exposed_ms if exposed_ms > 0 else None  # MB/ms is GB/s
    text = f"{who}: {per_step / MB:,.1f} MB a step{over}"
    if settings:
        text += f" ({settings})"
    if rate is not None:
        text += f"; the step waits {exposed_ms:.0f} ms for them ({rate:.2f} GB/s)"
    said = f"{r.label}: collectives given {per_step / MB:,.1f} MB a step (median of {len(got)} "
    return Cause(text, (Evidence(f"{said}steps), {exposed_ms:.0f} ms exposed", "agent"),))
