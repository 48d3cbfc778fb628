"""What limits the compute of a compute-bound job, from NVML: clocks cut by heat or the
power cap, DRAM bandwidth; and gpu-compute itself, the good case."""

from __future__ import annotations

from gputop.diagnose.findings import Evidence, Finding
from gputop.diagnose.rules.common import (
    GPU_BUSY,
    MAIN_COMPUTING,
    STACK_MIN,
    band,
    finding,
    pct,
    stack_shares,
)
from gputop.diagnose.signals.gpu import RECENT_S, GpuSignals
from gputop.diagnose.signals.host import HostSignals
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.thresholds import COMPUTE_CLOCK, SLOWDOWN_MARGIN_C
from gputop.vocab import stacks as stack
from gputop.vocab import steps as step
from gputop.vocab.bounds import GPU_COMPUTE, MEMORY_BANDWIDTH, THROTTLED_POWER, THROTTLED_THERMAL

THERMAL_SHARE = 0.3
"""Share of busy time with a thermal clock-event reason from which heat is cutting clocks."""
THERMAL_CLOCK = 0.95
"""SM clock over its max below which the thermal reasons are cutting it."""


def throttled_thermal(sig: RuleInputs) -> Finding:
    g = sig.gpu
    if g is None:
        return finding(THROTTLED_THERMAL, [], [], ["NVML"], "clocks cut by heat")
    agree = []
    if g.thermal_throttled >= THERMAL_SHARE:
        share = pct(g.thermal_throttled)
        text = f"thermal clock reasons {share} of busy time (>= {pct(THERMAL_SHARE)})"
        agree.append(Evidence(text, "NVML"))
    hottest, slowdown = g.hottest, g.slowdown
    if hottest is not None and slowdown is not None and hottest >= slowdown - SLOWDOWN_MARGIN_C:
        agree.append(Evidence(f"{g.hottest:.0f} C, slowdown at {g.slowdown} C", "NVML"))
    fired_clock = g.clock_ratio is not None and g.clock_ratio < THERMAL_CLOCK
    fired = fired_clock or len(agree) > 1
    against = [] if fired and agree else [_thermal_numbers(g)]
    return finding(
        THROTTLED_THERMAL,
        agree if fired else [],
        against,
        [],
        "clocks cut to keep the GPU cool",
        impact=1 - (g.clock_ratio or 1),
    )


def _thermal_numbers(g: GpuSignals) -> Evidence:
    """What the thermal rule read, shown when it does not fire (the why screen)."""
    temp = f", hottest {g.hottest:.0f} C (slowdown at {g.slowdown} C)" if g.hottest else ""
    clock = f", SM clock {pct(g.clock_ratio)} of max" if g.clock_ratio is not None else ""
    return Evidence(
        f"thermal clock reasons {pct(g.thermal_throttled)} of busy time (fires from "
        f"{pct(THERMAL_SHARE)}){clock}{temp}",
        "NVML",
        False,
    )


POWER_SHARE = 0.5
"""Share of busy time with a power-cap reason from which the cap is cutting clocks."""
POWER_CLOCK = 0.9
"""SM clock over its max below which the power cap costs real speed."""


def throttled_power(sig: RuleInputs) -> Finding:
    g = sig.gpu
    if g is None:
        return finding(THROTTLED_POWER, [], [], ["NVML"], "clocks cut by the power limit")
    agree = []
    if (
        g.power_throttled >= POWER_SHARE
        and g.clock_ratio is not None
        and g.clock_ratio < POWER_CLOCK
    ):
        agree.append(
            Evidence(
                f"power-cap reason {pct(g.power_throttled)} of busy time, SM clock "
                f"{pct(g.clock_ratio)} of max (< {pct(POWER_CLOCK)})",
                "NVML",
            )
        )
        if g.limit_lowered:
            agree.append(Evidence("enforced power limit below the card's default", "NVML"))
    against = []
    if not agree:
        clock = f", SM clock {pct(g.clock_ratio)} of max" if g.clock_ratio is not None else ""
        power = f", power {pct(g.power_ratio)} of the limit" if g.power_ratio is not None else ""
        text = (
            f"power-cap reason {pct(g.power_throttled)} of busy time (fires from "
            f"{pct(POWER_SHARE)} with the clock under {pct(POWER_CLOCK)}){clock}{power}"
        )
        against.append(Evidence(text, "NVML", False))  # fmt: skip
    return finding(
        THROTTLED_POWER,
        agree,
        against,
        [],
        "clocks cut to stay under the power limit",
        impact=1 - (g.clock_ratio or 1),
    )


DRAM_BUSY = 80.0
"""DRAM bandwidth (% of peak) from which memory is the limit (docs/facts/bounds.md,
"memory-bandwidth")..."""
TENSOR_LOW = 30.0
"""... while the tensor cores are busy under this (%)."""


def memory_bandwidth(sig: RuleInputs) -> Finding:
    g = sig.gpu
    if g is None:
        return finding(MEMORY_BANDWIDTH, [], [], ["NVML"], "DRAM bandwidth is the limit")
    agree, against, missing = [], [], []
    if g.dram is not None:
        text = (
            f"DRAM bandwidth {g.dram:.0f}% of peak (fires from {DRAM_BUSY:.0f}%), tensor cores "
            f"{g.tensor or 0:.0f}% (under {TENSOR_LOW:.0f}%)"
        )
        if g.dram >= DRAM_BUSY and (g.tensor or 0) < TENSOR_LOW:
            agree.append(Evidence(text, "NVML"))
        else:
            against.append(Evidence(text, "NVML", False))
    else:
        missing.append("GPM")
    return finding(
        MEMORY_BANDWIDTH,
        agree,
        against,
        missing,
        "DRAM bandwidth is the limit",
        impact=0.2 if agree else 0.0,
    )


COMPUTE_SM = 80.0
"""SMs busy (%, GPM) from which the utilisation is real work, not a trickle of kernels."""
COMPUTE_SHARE = 0.8
"""Share of the step in forward, backward and optimizer from which the step is computing."""
STACK_COMPUTE = 0.7
"""Share of the main threads' stack samples in forward, backward or the optimizer from which,
without the agent, the loop computes: py-spy also lands in the loss, zero_grad and the loop's
own lines, which the agent counts inside its phases or not at all."""
HELD_BUSY = 80.0
"""GPU utilisation (%) a held gpu-compute verdict needs: "well used" (docs/facts/bounds.md,
"GPU utilisation bands")."""


def gpu_compute(sig: RuleInputs) -> Finding:
    """The good case: the GPU busy (> GPU_BUSY % at COMPUTE_CLOCK of its max clock, no
    throttling) and the step in the model's own work. Utilisation is read over the window or
    its last RECENT_S, whichever is higher: a job that began computing a few seconds ago is
    compute-bound now. Without the agent, the main threads' stacks in forward / backward /
    optimizer (>= STACK_COMPUTE of the samples) while the process works on the CPU (>=
    MAIN_COMPUTING cores) say the loop computes: that outweighs a GPU reading still quiet from
    the start (it is shown against), never a GPU the rules call starved by data. Not before the
    agent's first steps and STACK_MIN dumps: until then no bottleneck could have shown."""
    agree: list[Evidence] = []
    against: list[Evidence] = []
    missing: list[str] = []
    nvml = _nvml_computes(sig.gpu, sig) if sig.gpu is not None else None
    if nvml is None:
        missing.append("NVML")
    elif nvml.supports:
        agree.append(nvml)
    if sig.steps and sig.steps.shares:
        said = [_agent_computes(sig.steps.shares, sig)]
    elif (shares := stack_shares(sig)) is not None and sig.host is not None:
        quiet = sig.gpu if not agree else None  # a GPU NVML did not find computing
        said = _stacks_compute(shares, sig, sig.host, quiet)
    else:
        said = []
    agree += [e for e in said if e.supports]
    against += [e for e in said if not e.supports]
    from_nvml = any(e.source == "NVML" for e in agree)
    from_stacks = any(e.source == "stacks" for e in agree)
    fired = _settled(sig, from_stacks) and ((from_nvml and not against) or from_stacks)
    # what NVML read, shown against when the rule does not fire (the why screen)
    nvml_shown = any(e.source == "NVML" for e in against)
    if not fired and nvml is not None and not nvml.supports and not nvml_shown:
        against.append(nvml)
    return finding(
        GPU_COMPUTE,
        agree if fired else [],
        against,
        missing,
        "the GPU computes all the time (the good case)",
    )


def _nvml_computes(g: GpuSignals, sig: RuleInputs) -> Evidence:
    """NVML's word on the good case: for it when the GPU is busy at full clock, unthrottled,
    else the numbers it read (against), so the why screen says what fell short."""
    # the window, or its last RECENT_S when the GPU got busier there (a job that started)
    lately = g.util_recent is not None and g.util_recent > g.util
    util = g.util_recent if lately and g.util_recent is not None else g.util
    sm = g.sm_recent if lately and g.sm_recent is not None else g.sm_active
    busy = HELD_BUSY if sig.holding == GPU_COMPUTE else GPU_BUSY
    sms = f", SMs busy {sm:.0f}%" if sm is not None else ""
    if (
        util >= busy
        and (g.clock_ratio or 0) >= COMPUTE_CLOCK
        and g.power_throttled < POWER_SHARE
        and g.thermal_throttled < THERMAL_SHARE
    ) and (sm is None or sm >= band(COMPUTE_SM, sig, GPU_COMPUTE)):
        when = f" over the last {RECENT_S:g} s" if lately else ""
        return Evidence(
            f"GPU busy {util:.0f}%{when} (>= {busy:.0f}%), SM clock "
            f"{pct(g.clock_ratio or 0)} of max{sms}",
            "NVML",
        )
    return Evidence(
        f"GPU busy {util:.0f}% (needs {busy:.0f}%), SM clock {pct(g.clock_ratio or 0)} "
        f"of max (needs {pct(COMPUTE_CLOCK)}), no throttling{sms}",
        "NVML",
        False,
    )


def _agent_computes(shares: dict[str, float], sig: RuleInputs) -> Evidence:
    """The agent's clock, for or against: the step is computing when the model's own phases
    take COMPUTE_SHARE of it."""
    compute = sum(shares.get(p, 0) for p in step.MODEL_PHASES)
    need = band(COMPUTE_SHARE, sig, GPU_COMPUTE)
    if compute >= need:
        text = f"forward + backward + optimizer {pct(compute)} of the step (>= {pct(need)})"
        return Evidence(text, "agent")
    text = f"forward + backward + optimizer only {pct(compute)} of the step (< {pct(need)})"
    return Evidence(text, "agent", False)


def _stacks_compute(
    shares: dict[str, float], sig: RuleInputs, h: HostSignals, quiet: GpuSignals | None
) -> list[Evidence]:
    """Without the agent, the stacks in the model's phases while the job works on the CPU say
    the loop computes; a GPU NVML did not find busy (``quiet``) is shown against them."""
    compute = sum(shares.get(p, 0) for p in stack.MODEL_PHASES)
    need = band(STACK_COMPUTE, sig, GPU_COMPUTE)
    working = h.cpu_wanted
    if not (compute >= need and working >= MAIN_COMPUTING and not h.exited):
        return []
    n = sig.stacks.samples if sig.stacks else 0
    said = [
        Evidence(
            f"main threads in forward / backward / optimizer {pct(compute)} of {n} "
            f"stack samples (>= {pct(need)})",
            "stacks",
        ),
        Evidence(f"the job uses {working:.1f} cores of CPU (>= {MAIN_COMPUTING:g})", "host"),
    ]
    if quiet is not None:
        text = f"GPU busy only {quiet.util:.0f}% over the window (from a quiet start?)"
        said.append(Evidence(text, "NVML", False))
    return said


def _settled(sig: RuleInputs, from_stacks: bool) -> bool:
    """The good case is the absence of a bottleneck: it can be told only once the sources that
    would show one have had their say (the agent's first steps, STACK_MIN dumps); before the
    agent's third step of a slow loop (5-s steps), the stacks have seen where the steps go."""
    agent_said = sig.steps is None or bool(sig.steps.shares) or from_stacks
    return agent_said and (sig.stacks is None or sig.stacks.samples >= STACK_MIN)
