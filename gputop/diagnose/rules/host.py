"""Causes on the host that stretch a slice rather than take time of their own: memory near
the cgroup's limit, threads that fight over too few CPUs (and whether thread pools are what
crowd them)."""

from __future__ import annotations

from dataclasses import replace

from gputop.diagnose.findings import Evidence, Finding
from gputop.diagnose.rules.common import HOLD, band, finding, pct, size
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.thresholds import (
    CPU_THROTTLED,
    MEM_NEAR,
    MEM_PRESSURE,
    RUNNABLE_PER_CPU,
    RUNQ_PER_CPU,
)
from gputop.vocab.bounds import (
    CPU_OVERSUBSCRIBED,
    DATA_BOUNDS,
    DATA_CPU_TRANSFORM,
    HOST_MEMORY_PRESSURE,
    HOST_OVERHEAD,
)

LIMIT_HITS = 0.5
"""Times per second the cgroup hits its memory limit from which the kernel is reclaiming."""


def host_memory_pressure(sig: RuleInputs) -> Finding:
    """Memory near the cgroup limit. It explains a slow loader when the loader is what fills
    it (DataLoader workers, each with its own copy of the dataset) or when reclaim stalls the
    job: there the data-input levers (more workers, more prefetch) would add memory and end in
    an OOM kill."""
    h = sig.host
    if h is None:
        return finding(HOST_MEMORY_PRESSURE, [], [], ["host"], "memory near the limit")
    if h.exited:  # the kills are why it is gone: say so rather than "nothing is training"
        kills = [Evidence(f"{h.oom_kills} OOM kill(s) in the cgroup, then the target exited",
                          "host")] if h.oom_kills else []  # fmt: skip
        return finding(
            HOST_MEMORY_PRESSURE, kills, [], [], "the OOM killer ended the job", impact=1.0
        )
    agree = []
    near = h.mem_near
    if h.oom_kills:
        agree.append(Evidence(f"{h.oom_kills} OOM kill(s) in the cgroup", "host"))
    if near:
        assert h.mem_limit and h.mem_working_set
        held = f", {h.workers} DataLoader workers (each may copy the dataset)" if h.workers else ""
        agree.append(
            Evidence(
                f"working set {size(h.mem_working_set)} of {size(h.mem_limit)} limit "
                f"({pct(h.mem_share or 0)}, > {pct(MEM_NEAR)}){held}",
                "host",
            )
        )
    reclaiming = near and h.mem_limit_hits >= LIMIT_HITS
    stalled = reclaiming or (near and h.psi.get("memory", 0) > MEM_PRESSURE)
    if reclaiming:
        agree.append(
            Evidence(f"limit hit {h.mem_limit_hits:.0f} times/s: the kernel reclaims", "host")
        )
    if h.psi.get("memory", 0) > MEM_PRESSURE:
        agree.append(
            Evidence(
                f"memory pressure {h.psi['memory']:.0f}% (> {MEM_PRESSURE:.0f}%)",
                "host",
                supports=near or bool(h.oom_kills),  # machine-wide on cgroup v1: maybe not ours
            )
        )
    agree, against = [e for e in agree if e.supports], [e for e in agree if not e.supports]
    f = finding(
        HOST_MEMORY_PRESSURE,
        agree,
        against,
        [],
        "memory near the cgroup limit",
        impact=0.5 if agree else 0.0,
    )
    if f.fired and (h.oom_kills or (near and (h.workers or stalled))):
        f = replace(f, explains=DATA_BOUNDS)
    return f


POOL_OF_EXCESS = 0.5
"""Share of the threads that find no CPU (runnable threads beyond the effective CPUs) that must
be intra-op pool threads (runnable threads beyond one per process) for the pools to be the
cause of the oversubscription (``pools_crowd``)..."""
POOL_OF_CPUS = 0.5
"""... and more pool threads than this share of the effective CPUs: a pin-memory or logging
thread beside a busy main thread is not a pool."""


def _intra_op(sig: RuleInputs) -> int | None:
    threads = sig.steps.fingerprint.get("intra_op_threads") if sig.steps else None
    if threads is None and sig.host is not None and sig.host.omp:
        threads = sig.host.omp
    if not isinstance(threads, int | float | str):
        return None  # not said, or not a number (the fingerprint comes from the trainer)
    try:
        return int(threads)
    except ValueError:
        return None


def pools_crowd(sig: RuleInputs) -> bool:
    """Whether intra-op thread pools (torch's, OpenMP's, BLAS's: several runnable threads in one
    process) rather than one thread per process (the main loop, each DataLoader worker) are
    what makes the runnable threads outnumber the CPUs. Either measured (pool threads are at
    least POOL_OF_EXCESS of the threads that find no CPU, and over POOL_OF_CPUS of the CPUs)
    or configured (the agent's torch.get_num_threads(), else OMP_NUM_THREADS, above the
    effective CPUs: one process alone can fill them; torch sizes its pool to the machine's
    cores, not to a cgroup's quota)."""
    h = sig.host
    if h is None or not h.effective_cpus:
        return False
    threads = _intra_op(sig)
    if threads is not None and threads > h.effective_cpus:
        return True
    if h.pool_threads is None or h.threads_running is None:
        return False
    # the band: easier to keep saying pools while oversubscription is shown, harder to start
    # while the transform is (the two readings sit close when a 2-thread pool meets 2 workers)
    factor = {CPU_OVERSUBSCRIBED: HOLD, DATA_CPU_TRANSFORM: 1 / HOLD}.get(sig.holding or "", 1.0)
    excess = h.threads_running - h.effective_cpus
    return (
        h.pool_threads > factor * POOL_OF_CPUS * h.effective_cpus
        and h.pool_threads >= factor * POOL_OF_EXCESS * excess
    )


def cpu_oversubscribed(sig: RuleInputs) -> Finding:
    """More threads ready to run than CPUs (with run-queue wait to show it), or the cgroup's
    quota throttling the job. Which finding is the principal when a data-input one fires too
    depends on who fills the CPUs, and so on which lever changes something:

    - intra-op thread pools (``pools_crowd``: several runnable threads per process, or
      torch/OMP threads configured past the CPUs): oversubscription is the cause and explains
      the slow loader (both data-input and data-input/cpu-transform); the lever caps the pools
      (OMP_NUM_THREADS, torch.set_num_threads), and more workers would add to the fight;
    - one thread per process, the workers computing (data-input/cpu-transform): the transform
      itself saturates the CPUs. That finding explains this one, which stays as a secondary:
      there is no pool to cap, and the lever is a cheaper transform or one moved to the GPU,
      not more workers;
    - anything else (workers that wait, a plain data-input): the CPU fight explains it.

    The loop's own Python (host-overhead) is CPU work of the training thread, which the fight
    stops like every other thread: a quota throttles the whole cgroup, a queue longer than the
    CPUs delays every runnable thread. Its slice is stretched by the fight, which is named
    under it: oversubscription is a cause that stretches a slice."""
    h = sig.host
    if h is None or h.exited or not h.effective_cpus:
        return finding(CPU_OVERSUBSCRIBED, [], [], ["host"], "too many threads for the CPUs")
    agree = []
    e = h.effective_cpus
    if (
        h.threads_running is not None
        and h.runq is not None
        and h.threads_running > band(RUNNABLE_PER_CPU, sig, CPU_OVERSUBSCRIBED) * e
        and h.runq / e > band(RUNQ_PER_CPU, sig, CPU_OVERSUBSCRIBED)
    ):
        agree.append(
            Evidence(
                f"{h.threads_running:.0f} thread{'' if round(h.threads_running) == 1 else 's'} "
                f"ready to run on {e:.1f} CPUs "
                f"({h.cpu_source}), run-queue wait {h.runq:.1f} s/s",
                "host",
            )
        )
    throttled = band(CPU_THROTTLED, sig, CPU_OVERSUBSCRIBED)
    if h.throttled_ratio is not None and h.throttled_ratio > throttled:
        share = pct(h.throttled_ratio)
        text = f"cgroup throttled in {share} of periods (> {pct(throttled)})"
        agree.append(Evidence(text, "host"))
    f = finding(
        CPU_OVERSUBSCRIBED,
        agree,
        [],
        [],
        "threads fight over too few CPUs",
        impact=0.4 if agree else 0.0,
    )
    # a loader starved of CPU is a symptom, and its lever (more workers) would add threads to
    # the fight; reads that wait on storage are not explained by the CPUs. Workers that
    # compute are the cause rather than the victim unless thread pools crowd the CPUs
    # (data_input then explains this finding: the transform fills the CPUs)
    if not f.fired:
        return f
    data = DATA_BOUNDS[:2] if pools_crowd(sig) else DATA_BOUNDS[:1]
    return replace(f, explains=(*data, HOST_OVERHEAD))
