"""The loss slices of a step and the rules that say what limits each: the straggler, comms,
data input (and which resource the loader lacks), H2D copies, side work, the loop's own
Python (host-overhead)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gputop.diagnose.findings import Evidence, Finding
from gputop.diagnose.rules.common import (
    GPU_BUSY,
    GPU_STARVED,
    MAIN_COMPUTING,
    STACK_MIN,
    STACK_SHARE,
    at,
    band,
    finding,
    pct,
    stack_shares,
)
from gputop.diagnose.rules.host import pools_crowd
from gputop.diagnose.rules.progress import STEPS_SEEN
from gputop.diagnose.signals.gpu import GpuSignals
from gputop.diagnose.signals.host import WORKERS_COMPUTE, HostSignals
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.signals.steps import SPIKE, StepSignals
from gputop.diagnose.thresholds import (
    COMMS_SHARE,
    DATA_WAIT_WARN,
    IO_PRESSURE,
    LAUNCH_UTIL,
    SIDE_SHARE,
    TINY_KERNELS,
    WORKER_PEGGED,
)
from gputop.model.ranks import STRAGGLER_EXCESS
from gputop.model.stack_stats import OwnCode
from gputop.vocab import stacks as stack
from gputop.vocab import steps as step
from gputop.vocab.bounds import (
    COMMS,
    CPU_OVERSUBSCRIBED,
    DATA_BOUNDS,
    DATA_CPU_TRANSFORM,
    DATA_INPUT,
    DATA_IO,
    H2D_COPY,
    HOST_OVERHEAD,
    SIDE_WORK,
    STRAGGLER,
)

H2D_SHARE = 0.10
"""Host-to-device copies over this share of the step are on the critical path."""


def straggler(sig: RuleInputs) -> Finding:
    """One rank works longer than the median rank: the definition and its numbers are the
    model's (``model.ranks``, as the ranks pane, /metrics and the report read them)."""
    st = sig.steps
    slow = st.rank_work.slowest if st is not None and st.rank_work is not None else None
    if slow is None:
        return finding(STRAGGLER, [], [], [] if st else ["agent"], "one rank slower")
    agree = []
    # the model's definition, with the band while straggler is shown: data skew varies from
    # batch to batch, and a median excess near 10% would hand the verdict to the comms wait
    # it causes and back
    need = band(STRAGGLER_EXCESS, sig, STRAGGLER)
    if slow.step_ms and slow.exceeds(need):
        agree.append(
            Evidence(
                f"rank {slow.row.name} works {slow.row.work_ms:.0f} ms per step vs median "
                f"{slow.median_work_ms:.0f} ms (>= {pct(need)} of the "
                f"{slow.step_ms:.0f} ms step)",
                "agent",
            )
        )
    return finding(
        STRAGGLER,
        agree,
        [],
        [],
        f"rank {slow.row.name} is slower; the others wait",
        impact=slow.excess_of_step,
    )


def comms(sig: RuleInputs) -> Finding:
    agree, missing = [], []
    share = None
    limit, stacks_limit = band(COMMS_SHARE, sig, COMMS), band(STACK_SHARE, sig, COMMS)
    if sig.steps is not None and sig.steps.shares:
        share = sig.steps.shares.get(step.GRAD_SYNC, 0.0)
        if share > limit:
            agree.append(
                Evidence(
                    f"grad sync {pct(share)} of the step (> {pct(limit)}; healthy < 10-15%)",
                    "agent",
                )
            )
    else:
        missing.append("agent")
    if sig.stacks is not None:
        c = sig.stacks.main_shares.get(stack.COLLECTIVE_WAIT, 0.0)
        if c > stacks_limit:
            agree.append(
                Evidence(f"main threads in a collective {pct(c)} of stack samples", "stacks")
            )
    else:
        missing.append("stacks")
    return finding(
        COMMS,
        agree,
        [],
        missing,
        "time waiting for gradient communication",
        impact=share or 0.0,
    )


JOB_READS = 1e6
"""Bytes/s the job must read itself before the machine's I/O pressure is blamed on it."""
DISK_WAITERS = 1.0
"""Threads of the job in disk wait (D state) on average from which storage holds it up."""


def _io_evidence(h: HostSignals) -> Evidence | None:
    """Threads of the job asleep on the disk, or I/O pressure while the job reads: only the
    parts that crossed are shown. PSI on a cgroup-v1 host is machine-wide, so it counts only
    when the job itself reads."""
    reading = h.read_bytes_rate >= JOB_READS
    parts = []
    if h.disk_wait >= DISK_WAITERS:
        parts.append(f"{h.disk_wait:.1f} threads in disk wait (D state) on average")
    if reading and h.psi.get("io", 0) > IO_PRESSURE:
        parts.append(f"I/O pressure {h.psi['io']:.0f}% (> {IO_PRESSURE:.0f}%)")
    if not parts:
        return None
    if reading:
        parts.append(f"reading {h.read_bytes_rate / 1e6:.0f} MB/s from storage")
    return Evidence(", ".join(parts), "host")


def _transforming(h: HostSignals, sig: RuleInputs) -> bool:
    """DataLoader workers that compute: every one pegged, or on average wanting at least
    WORKERS_COMPUTE of a core (CPU used plus time queued for one: on shared or saturated cores
    a computing worker gets less than it wants, but it still wants it)."""
    need = band(WORKERS_COMPUTE, sig, DATA_CPU_TRANSFORM)
    return bool(h.workers) and (
        h.workers_pegged == h.workers
        or (h.workers_busy or 0) >= need
        or (h.workers_demand or 0) >= need
    )


KERNEL_READS = 0.4
"""Share of the loader's CPU spent in the kernel from which its work is reading, not
transforming: a transform runs in user space (a few % system time), while a loader that opens,
stats and reads many small files spends most of its CPU in those syscalls, even when the page
cache serves them (docs/facts/bounds.md, "data-input/io": the lever is fewer, larger files,
not a cheaper transform)."""
LOADER_BUSY = 0.2
"""CPU (cores per loader process) from which the kernel share is read: an idle loader's few
system calls are no bottleneck."""


def _kernel_reads(h: HostSignals, sig: RuleInputs) -> Evidence | None:
    """The loader's CPU goes mostly to system calls (KERNEL_READS): evidence, else None."""
    share = h.loader_kernel
    need = band(KERNEL_READS, sig, DATA_IO)
    if share is None or share < need:
        return None
    if h.workers:
        who, each = f"{h.workers} DataLoader workers spend {pct(share)} of their", h.workers_busy
        per = " each"
    else:
        who, each, per = f"the main process spends {pct(share)} of its", h.cpu_cores, ""
    if each is None or each < LOADER_BUSY:
        return None
    return Evidence(
        f"{who} CPU in the kernel (>= {pct(need)}), {pct(each)} of a "
        f"core{per}: opening and reading files, not transforming them",
        "host",
    )


STARVED_FROM = 2 * 5.0
"""GPU utilisation (%) from which a GPU seen alone works at all (twice IDLE_UTIL)..."""
BURSTY = 0.2
"""... and the variation (coefficient) of its utilisation from which it works in bursts."""


def data_input(sig: RuleInputs) -> Finding:
    """The GPU waits for batches: the agent's batch wait, the main thread's stacks in the
    loader, a starved GPU. Which resource the loader lacks names the variant: CPU for workers
    that compute (or a main thread that prepares batches itself), storage for reads that
    block. When the workers' own computing saturates the CPUs (one thread each, no thread
    pools: ``pools_crowd`` is false) the finding explains cpu-oversubscribed: the transform is
    what fills the CPUs, and the lever is a cheaper transform, not a thread cap."""
    agree: list[Evidence] = []
    against: list[Evidence] = []
    missing: list[str] = []
    share = None
    warn = band(DATA_WAIT_WARN, sig, *DATA_BOUNDS)
    if sig.steps is not None and sig.steps.shares:
        share = sig.steps.shares.get(step.DATA_WAIT, 0.0)
        if share > warn:
            text = f"batch wait {pct(share)} of the step (target < {pct(DATA_WAIT_WARN)})"
            agree.append(Evidence(text, "agent"))
    else:
        missing.append("agent")
    shares = stack_shares(sig)
    if shares is not None:
        agree += _stacks_in_the_loader(shares, sig)
    else:
        missing.append("stacks")
    if sig.gpu is not None:
        gpu = _gpu_starved(sig.gpu, sig, waiting=bool(agree))
        (agree if gpu.supports else against).append(gpu)
    fired = bool(agree) and (share is None or share > warn)
    lacks = _WAITS
    if fired and sig.host is not None and not sig.host.exited:
        lacks = _what_the_loader_lacks(sig.host, shares, share, sig)
    f = finding(
        lacks.bound,
        agree + list(lacks.evidence) if fired else [],
        against,
        missing,
        lacks.summary,
        impact=share if share is not None else 0.3,
    )
    return replace(f, explains=lacks.explains) if f.fired else f


def _stacks_in_the_loader(shares: dict[str, float], sig: RuleInputs) -> list[Evidence]:
    """The main thread's stacks waiting on or preparing data over STACK_SHARE of the samples:
    the agent's batch wait as py-spy sees it, with or without the agent."""
    w = shares.get(stack.DATA_WAIT, 0.0) + shares.get(stack.FETCH, 0.0)
    need = band(STACK_SHARE, sig, *DATA_BOUNDS)
    if w > need:
        n = sig.stacks.samples if sig.stacks else 0
        text = f"main thread waiting on or preparing data {pct(w)} of {n} stack samples"
        return [Evidence(f"{text} (> {pct(need)})", "stacks")]
    return []


def _gpu_starved(g: GpuSignals, sig: RuleInputs, waiting: bool) -> Evidence:
    """NVML's word, for or against: a GPU idle while the other sources see the job wait for
    data (``waiting``), or one that works in bursts when NVML alone speaks for the job."""
    if g.util < GPU_STARVED and waiting:
        return Evidence(f"GPU busy only {g.util:.0f}% of the time", "NVML")
    if g.util >= GPU_BUSY:
        return Evidence(f"GPU busy {g.util:.0f}% of the time", "NVML", False)
    if sig.gpu_view and STARVED_FROM <= g.util < GPU_STARVED and g.util_cv >= BURSTY:
        # nothing but NVML speaks for the job: a GPU that works in bursts and waits between
        # them is starved, most often of batches (attached, the job's own signals say which)
        return Evidence(
            f"GPU busy only {g.util:.0f}% of the time, in bursts (variation "
            f"{g.util_cv:.2f} >= {BURSTY:g}): it waits between batches of work",
            "NVML",
        )
    return Evidence(f"GPU busy {g.util:.0f}% of the time", "NVML", False)


@dataclass(frozen=True)
class _Lacks:
    """What a data loader lacks, as data-input names it: the bound (the variant), its summary,
    the host's evidence for it, and the bounds it explains."""

    bound: str
    summary: str
    evidence: tuple[Evidence, ...] = ()
    explains: tuple[str, ...] = ()


_WAITS = _Lacks(DATA_INPUT, "the GPU waits for the next batch")
"""No resource named: the GPU waits for batches, the host does not say why."""
_READS = "reading the data is the bottleneck"


def _what_the_loader_lacks(
    h: HostSignals, shares: dict[str, float] | None, waited: float | None, sig: RuleInputs
) -> _Lacks:
    """The host's word on why the batches are late: CPU for workers that compute or a main
    thread that prepares them, storage for reads that block; the CPU variants explain
    cpu-oversubscribed unless thread pools crowd the CPUs (then the lever is a thread cap)."""
    explains = () if pools_crowd(sig) else (CPU_OVERSUBSCRIBED,)
    io = _io_evidence(h)
    kernel = _kernel_reads(h, sig)
    if kernel is not None:  # busy, but in opens and reads: reading, not transforming
        return _Lacks(DATA_IO, _READS, tuple(e for e in (io, kernel) if e is not None))
    if _transforming(h, sig):
        # pegged, or busy most of the time on a machine whose cores are shared
        busy = (_workers_compute(h),)
        return _Lacks(DATA_CPU_TRANSFORM, "DataLoader workers are CPU-bound", busy, explains)
    if io is not None:
        return _Lacks(DATA_IO, _READS, (io,))
    prepares = None if h.workers else _main_prepares(shares, waited, sig)
    if prepares is not None:
        summary = "the main thread prepares every batch itself"
        return _Lacks(DATA_CPU_TRANSFORM, summary, (prepares,), explains)
    return _WAITS


MAIN_PREPARES = 0.5
"""Of the time the loop waits for its batches, the share py-spy's stacks of the main thread
spend in the dataset's fetch (``Fetcher.fetch``: ``__getitem__`` and collate, with
num_workers=0) from which the main thread makes the batches it waits for."""
FETCH_COMPUTING = 0.5
"""Of the main thread's time in that fetch, the share it computes in (its CPU time in the
batch waits, as the agent times it; else the share of its stack samples there in which it
ran or was queued for a CPU) from which it makes the batches, rather than sleeping on a read."""
FETCH_SEEN = 3
"""Stack samples in that fetch a verdict needs: one or two running there tell little."""


def _main_prepares(
    shares: dict[str, float] | None, waited: float | None, sig: RuleInputs
) -> Evidence | None:
    """A loader with no workers whose main thread computes the batches itself: evidence, else
    None. Judged within the wait, not against the whole step: a 5-ms transform before a 40-ms
    step is a small share of the step but all of the wait. With the agent, its own clock
    says: the training thread's CPU time in its batch waits (with no workers the wait is its
    own fetch). Its stack samples cannot: taken when the main thread lets go of the GIL, they
    land in the C call after a short pure-Python transform, not in it. Without the agent,
    py-spy's stacks (which need no GIL): the fetch's share of the wait, and the running
    state there."""
    need = band(FETCH_COMPUTING, sig, DATA_CPU_TRANSFORM)
    cpu = sig.steps.data_cpu if sig.steps is not None else None
    if cpu is not None:
        if cpu < need:
            return None
        return Evidence(
            f"the main thread computed through {pct(min(1.0, cpu))} of its batch waits (its "
            f"CPU time in them, >= {pct(need)}): with no DataLoader workers it makes each batch",
            "agent",
        )
    if shares is None or sig.stacks is None:
        return None
    fetch = shares.get(stack.FETCH, 0.0)
    wait = max(waited or 0.0, fetch + shares.get(stack.DATA_WAIT, 0.0))
    running = sig.stacks.main_running.get(stack.FETCH, 0.0)
    n = sig.stacks.samples
    if (
        round(fetch * n) < FETCH_SEEN
        or fetch < band(MAIN_PREPARES, sig, DATA_CPU_TRANSFORM) * wait
        or running < need
    ):
        return None
    return Evidence(
        f"main thread in the dataset's fetch for {pct(min(1.0, fetch / wait))} of the batch "
        f"wait (>= {pct(band(MAIN_PREPARES, sig, DATA_CPU_TRANSFORM))}; {round(fetch * n)} of "
        f"{n} stack samples), running in {pct(running)} of them: it computes each batch",
        "stacks",
    )


def _workers_compute(h: HostSignals) -> Evidence:
    """How hard the DataLoader workers compute: the transform's evidence for cpu-transform."""
    wants = ""
    if (h.workers_demand or 0) - (h.workers_busy or 0) >= 0.1:
        wants = f", wanting {pct(h.workers_demand or 0)} with the run-queue wait"
    return Evidence(
        f"{h.workers_pegged} of {h.workers} workers at "
        f">= {pct(WORKER_PEGGED)} of a core, "
        f"{pct(h.workers_busy or 0)} of a core each on average{wants} "
        f"(computing from {pct(WORKERS_COMPUTE)})",
        "host",
    )


H2D_RX_GBPS = 1.0
"""PCIe receive (GB/s) that, with the SMs mostly idle, means copies gate the GPU
(docs/facts/nvml-signals.md, "PCIe throughput")."""
H2D_SM_IDLE = 30.0


def h2d_copy(sig: RuleInputs) -> Finding:
    agree, missing = [], []
    share = 0.0
    if sig.steps is not None and sig.steps.shares:
        share = sig.steps.shares.get(step.H2D, 0.0)
        if share > H2D_SHARE:
            text = f"H2D copy {pct(share)} of the step (> {pct(H2D_SHARE)})"
            agree.append(Evidence(text, "agent"))
    else:
        missing.append("agent")
    g = sig.gpu
    if g is not None and g.pcie_rx_gbps is not None:
        busy = g.sm_active if g.sm_active is not None else g.util
        what = "SMs busy" if g.sm_active is not None else "GPU busy"
        if g.pcie_rx_gbps >= H2D_RX_GBPS and busy < H2D_SM_IDLE:
            agree.append(
                Evidence(
                    f"PCIe to the GPU {g.pcie_rx_gbps:.1f} GB/s (>= {H2D_RX_GBPS:g}) while "
                    f"{what} {busy:.0f}% (< {H2D_SM_IDLE:.0f}%)",
                    "NVML",
                )
            )
        elif share > H2D_SHARE:
            agree.append(Evidence(f"PCIe to the GPU {g.pcie_rx_gbps:.1f} GB/s", "NVML"))
    against = []
    if not agree and g is not None and g.pcie_rx_gbps is not None:
        text = (
            f"PCIe to the GPU {g.pcie_rx_gbps:.1f} GB/s (fires from {H2D_RX_GBPS:g} with the "
            f"SMs under {H2D_SM_IDLE:.0f}% busy)"
        )
        against.append(Evidence(text, "NVML", False))  # fmt: skip
    return finding(
        H2D_COPY,
        agree,
        against,
        missing,
        "host-to-device copies on the critical path",
        impact=share or (0.3 if agree else 0.0),
    )


PERIODIC_MIN = 2
PERIODIC_OF = 3
"""Spikes count as periodic side work while there are at most max(PERIODIC_MIN, steps //
PERIODIC_OF) of them; more and slow steps are the norm (a noisy machine)."""
SPIKE_TIME = 0.05
"""Share of the time the spikes' excess must take to count."""
SAVE_SHARE = 0.05
"""Share of stack samples in torch.save that counts as checkpointing."""


SIDE_GROWTH = (*step.SIDE_PHASES, step.OTHER, step.UNMARKED)
"""What a spike must have grown in to be side work (besides garbage collection): checkpoint,
eval/logging, or time outside the training phases (a save or an eval pass the agent did not
mark). A step that is long because its forward, backward or batch wait was long is noise on
the machine, throttling or the loader: not work beside training."""


OVERDUE_S = 1.0
"""Seconds without a finished step, and over SPIKE x the median step, from which the step in
progress is a spike whose cause only the stacks can show yet."""


def _step_overdue(st: StepSignals) -> bool:
    since = st.since_step_s
    return since is not None and since > max(OVERDUE_S, SPIKE * st.median_ms / 1000)


def side_work(sig: RuleInputs) -> Finding:
    """Work beside training that stalls it: the agent's checkpoint and eval/logging phases over
    SIDE_SHARE of step time; periodic spikes that grew in side work (SIDE_GROWTH) or GC taking
    over SPIKE_TIME of the time; Python GC over SIDE_SHARE. Without the agent, the main thread's
    stacks alone: in torch.save or an evaluation pass (``stack.SIDE_PHASES``) in over
    SIDE_SHARE of the samples, the stack estimate of the same share of time. Every threshold
    has its band (HOLD) while side-work is the principal: a few spikes leaving the window do
    not end a side-work verdict whose cause is still there."""
    st = sig.steps
    missing: list[str] = []
    seen: list[_Side] = []
    side_share = band(SIDE_SHARE, sig, SIDE_WORK)
    if st is None or not st.shares:
        missing.append("agent")
    else:
        spikes = _side_spikes(st, sig)
        gc = _gc_pauses(st, spikes.gc, side_share)
        seen += [_side_phases(st.shares, side_share), spikes, gc]
    shares = stack_shares(sig)
    if shares is None:
        missing.append("stacks")
    else:
        seen.append(_side_stacks(shares, sig, side_share))
    agree = [e for s in seen for e in s.evidence]
    summary = (
        "garbage collection pauses stall training"
        if any(s.gc for s in seen)
        else "periodic side work stalls training"
    )
    impact = max((s.share for s in seen), default=0.0)
    return finding(SIDE_WORK, agree, [], missing, summary, impact=impact)


@dataclass(frozen=True)
class _Side:
    """What one reading shows of side work: its evidence, the share of time it puts on side
    work (the finding's impact is the largest) and whether GC pauses made the spikes."""

    evidence: tuple[Evidence, ...] = ()
    share: float = 0.0
    gc: bool = False


def _side_phases(shares: dict[str, float], side_share: float) -> _Side:
    """The agent's checkpoint, eval and logging phases: their share of the step is the size of
    the side work, named part by part once together they take over ``side_share``."""
    side = sum(shares.get(p, 0.0) for p in step.SIDE_PHASES)
    if side > side_share:
        named = {step.CHECKPOINT: "checkpointing", step.EVAL: "evaluation",
                 step.EVAL_LOG: "evaluation", step.LOG: "logging"}  # fmt: skip
        parts: dict[str, float] = {}
        for phase, what in named.items():
            parts[what] = parts.get(what, 0.0) + shares.get(phase, 0.0)
        which = " + ".join(f"{w} {pct(v)}" for w, v in parts.items() if v >= 0.005)
        text = f"{which} of step time (> {pct(side_share)} together)"
        return _Side((Evidence(text, "agent"),), side)
    return _Side(share=side)


def _side_spikes(st: StepSignals, sig: RuleInputs) -> _Side:
    """Periodic spikes that grew in side work or GC and take over SPIKE_TIME of the time: side
    work the step's median hides, as a save every N steps is."""
    n, med = st.spike_steps or st.steps, st.spike_median_ms or st.median_ms
    total = med * n + sum(s.ms - med for s in st.spikes)
    spikes = tuple(s for s in st.spikes if s.grew.startswith("gc") or s.grew in SIDE_GROWTH)
    periodic = max(PERIODIC_MIN, n // PERIODIC_OF)
    if len(spikes) > periodic:
        # slow steps are the norm (a noisy machine): only measured GC pauses still stand out
        spikes = tuple(s for s in spikes if s.grew.startswith("gc"))
    excess = sum(s.ms - med for s in spikes)
    spike_time = band(SPIKE_TIME, sig, SIDE_WORK)
    if spikes and len(spikes) <= periodic and total and excess / total > spike_time:
        phases = sorted({s.grew for s in spikes})
        gc = any(p.startswith("gc") for p in phases)
        if "gc" in phases and "gc (full collections)" in phases:
            phases.remove("gc")  # one GC entry: a young collection lengthened by load too
        text = (
            f"{len(spikes)} of {n} steps over {SPIKE:g}x the median ({med:.0f} ms), "
            f"{pct(excess / total)} of the time (> {pct(spike_time)}), growing in "
            f"{', '.join(phases)}"
        )
        return _Side((Evidence(text, "agent"),), excess / total, gc)
    return _Side()


def _gc_pauses(st: StepSignals, gc_spikes: bool, side_share: float) -> _Side:
    """Python's garbage collection as the agent times it: shown when it takes over
    ``side_share`` of step time or the spikes grew in it."""
    if st.gc_share is None or not (gc_spikes or st.gc_share > side_share):
        return _Side()
    over = f" (> {pct(side_share)})" if st.gc_share > side_share else ""
    text = (
        f"Python garbage collection {pct(st.gc_share)} of step time{over}, "
        f"{st.gc_full} full collections in {st.spike_steps or st.steps} steps"
    )
    return _Side((Evidence(text, "agent"),), st.gc_share)


def _side_stacks(shares: dict[str, float], sig: RuleInputs, side_share: float) -> _Side:
    """The main thread's stacks in torch.save or an eval pass: corroboration where the agent
    times the steps, else the estimate of side work's share of the time."""
    st = sig.steps
    n = sig.stacks.samples if sig.stacks else 0
    saving = shares.get(stack.CHECKPOINT_SAVE, 0)
    evaluating = shares.get(stack.EVAL, 0) + shares.get(stack.EVAL_LOG, 0)
    # the agent has the step's numbers, unless the step in progress is itself the side
    # work: an eval pass of 10 s shows in no finished step until it ends
    if st is not None and bool(st.shares) and not _step_overdue(st):
        if saving > SAVE_SHARE:
            text = f"main thread in torch.save in {saving:.0%} of {n} stack samples"
            return _Side((Evidence(f"{text} (> {pct(SAVE_SHARE)})", "stacks"),))
        return _Side()
    if saving + evaluating > side_share:
        parts = [f"in torch.save {pct(saving)}"] if saving else []
        if evaluating:
            parts.append(f"in an eval pass or logging {pct(evaluating)}")
        text = f"main thread {', '.join(parts)} of {n} stack samples"
        evidence = Evidence(f"{text} (> {pct(side_share)} of the time)", "stacks")
        return _Side((evidence,), saving + evaluating)
    return _Side()


LOW_POWER = 0.4
"""... or, without GPM, it draws under this share of its power limit."""
SYNC_SHARE = 0.1
"""Share of stack samples of the main threads in explicit syncs that counts."""


LOOP_SHARE = 0.3
"""Share of a typical step the loop spends in its own Python outside every training phase
(per-step metrics, logging, .item()/.tolist() syncs, bookkeeping) from which that is the
bottleneck: the GPU idles through it every step (docs/facts/bounds.md, "host-overhead").
Every step rather than a periodic spike, which is side-work. The same share of the main
threads' stack samples without the agent."""


def _agent_times_the_loop(sig: RuleInputs) -> bool:
    """The agent has steps enough to time the loop: its clock decides, the stacks say where."""
    st = sig.steps
    return st is not None and bool(st.shares) and st.steps >= STEPS_SEEN


def _own_code_counts(sig: RuleInputs) -> OwnCode | None:
    """The main threads' own-code samples (since they began to train) when there are STACK_MIN
    of them and the job computes (CPU used): sleeping in its own code costs no step time."""
    own = sig.stacks.own_code if sig.stacks is not None else None
    h = sig.host
    if own is None or own.samples < STACK_MIN or (h is not None and h.cpu_wanted < MAIN_COMPUTING):
        return None
    return own


def loop_share(sig: RuleInputs) -> float | None:
    """The share of a typical step the loop spends in its own Python outside every training
    phase, when it crosses LOOP_SHARE (its band while host-overhead is shown): the agent's
    clock when it has steps, else the main threads' own-code samples; None otherwise. The rule
    and its levers both read it, so a lever never follows a decision the rule did not make."""
    need = band(LOOP_SHARE, sig, HOST_OVERHEAD)
    if _agent_times_the_loop(sig):
        assert sig.steps is not None
        share: float | None = sig.steps.loop_share
    else:
        own = _own_code_counts(sig)
        share = own.share if own is not None else None
    return share if share is not None and share > need else None


def own_functions(own: OwnCode) -> str:
    """The job's functions the loop's own time goes to: "log_metrics at train.py:18 40%"."""
    return ", ".join(f"{f.name} at {at(f)} {pct(x)}" for f, x in own.at)


def host_overhead(sig: RuleInputs) -> Finding:
    """The GPU waits for the host: NVML shows many tiny kernels (util high, SMs or power low),
    the main thread sits in explicit syncs, or, every step, the loop's own Python outside the
    training phases takes over LOOP_SHARE (``loop_share``: the agent's typical step; without
    the agent, the main threads' stack samples in the job's own code while it uses CPU)."""
    g = sig.gpu
    agree, against, missing = [], [], []
    impact = 0.0
    if g is None:
        missing.append("NVML")
    elif g.sm_active is not None:
        if g.util >= LAUNCH_UTIL and g.sm_active < TINY_KERNELS * g.util:
            agree.append(
                Evidence(
                    f"util {g.util:.0f}% but SMs busy {g.sm_active:.0f}%: many tiny kernels", "NVML"
                )
            )
            impact = 0.3
        else:
            against.append(
                Evidence(
                    f"util {g.util:.0f}%, SMs busy {g.sm_active:.0f}% (tiny kernels: util from "
                    f"{LAUNCH_UTIL:.0f}% with SMs under {pct(TINY_KERNELS)} of it)",
                    "NVML",
                    False,
                )
            )
    else:
        missing.append("GPM")
        if g.util >= LAUNCH_UTIL and g.power_ratio is not None and g.power_ratio < LOW_POWER:
            agree.append(
                Evidence(f"util {g.util:.0f}% at {pct(g.power_ratio)} of the power limit", "NVML")
            )
            impact = 0.3
    if sig.stacks and sig.stacks.main_shares.get(stack.HOST_SYNC, 0) > SYNC_SHARE:
        agree.append(Evidence("main thread in explicit syncs", "stacks"))
        impact = max(impact, 0.3)
    summary = "the GPU waits for the CPU to launch work"
    share = loop_share(sig)
    if share is not None:
        summary = "the loop's own Python outside the training phases holds up every step"
        impact = max(impact, share)
        need = band(LOOP_SHARE, sig, HOST_OVERHEAD)
        own = _own_code_counts(sig)
        if _agent_times_the_loop(sig):
            agree.append(
                Evidence(
                    f"the typical step spends {pct(share)} outside its data, forward, "
                    f"backward and optimizer phases (> {pct(need)}): the loop's own Python",
                    "agent",
                )
            )
            if own is not None and own.share > need:  # the stacks agree, and say where
                agree.append(Evidence(f"main thread in its own code: {own_functions(own)}",
                                      "stacks"))  # fmt: skip
        elif own is not None:
            agree.append(
                Evidence(
                    f"main thread in its own code, outside every training phase, "
                    f"{pct(share)} of {own.samples} stack samples since it began to train, "
                    f"using CPU (> {pct(need)}): {own_functions(own)}",
                    "stacks",
                )
            )
    return finding(HOST_OVERHEAD, agree, against, missing, summary, impact=impact)
