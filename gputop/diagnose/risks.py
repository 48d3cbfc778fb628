"""Risks beside any verdict: what is not costing time yet but will end the job. Memory near
its limit is one (docs/facts/host-signals.md, "Memory near the limit"): a job at 92% of its
cgroup limit may compute at full speed and still be one allocation from an OOM kill, so the
risk is said whatever the principal is: the working set against the limit, how fast it grows,
when it reaches the limit at that rate, and which process grows. Pure."""

from __future__ import annotations

from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.thresholds import MEM_RISK
from gputop.model.durations import duration_text

GIB = float(1 << 30)
MIB = float(1 << 20)
HORIZON_S = 1800.0
"""Growth that reaches the limit within this long is a risk below MEM_RISK too."""
GROWTH_MIN = 1 * MIB / 60
"""Growth under 1 MiB a minute is no growth (allocator noise)."""


def memory_risk(sig: RuleInputs) -> str | None:
    """One line, or None when the working set is far from its limit and not heading there."""
    h = sig.host
    if h is None or h.exited or not h.mem_limit or h.mem_working_set is None:
        return None
    share = h.mem_working_set / h.mem_limit
    growth = h.mem_growth if h.mem_growth is not None and h.mem_growth >= GROWTH_MIN else None
    left = h.mem_limit - h.mem_working_set
    eta = left / growth if growth else None
    if share < MEM_RISK and (eta is None or eta > HORIZON_S):
        return None
    text = (
        f"memory: working set {h.mem_working_set / GIB:.1f} of {h.mem_limit / GIB:.1f} GiB "
        f"({share:.0%} of the limit)"
    )
    if growth and eta is not None:
        text += (
            f", +{growth * 60 / MIB:.0f} MiB/min: the limit in ~{duration_text(eta)} at this rate"
        )
        g = h.grower
        if g is not None and (g.rss_growth or 0.0) >= GROWTH_MIN:
            who = f"rank {g.rank}" if g.rank is not None else g.role
            text += f" (pid {g.pid}, {who}, +{(g.rss_growth or 0.0) * 60 / MIB:.0f} MiB/min)"
    else:
        text += ", not growing: one large allocation from an OOM kill"
    return text


def risks_of(sig: RuleInputs) -> tuple[str, ...]:
    """Every risk that holds now, one line each."""
    return tuple(r for r in (memory_risk(sig),) if r)
