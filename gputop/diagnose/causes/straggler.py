"""Why one rank is slower than the others, from what is measured of each rank: which part of
its own work is longer (its own budget against the typical rank's), and when that is its
compute, what differs about it: larger inputs (the agent counts each step's input elements),
CPUs it shares (its threads wait for a CPU), else nothing measured (its hardware or placement).
The straggler studies separate the same causes (docs/facts/bounds.md, "Straggler causes").
Pure."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace

from gputop.diagnose.causes.rank_data import data_cause
from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.lever import Lever, advice, sized
from gputop.diagnose.signals.gpu import GpuSignals
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget, RankBudget
from gputop.model.host import Sharer
from gputop.model.ranks import Slowest
from gputop.model.setup import parallel_kind
from gputop.model.shown import printable
from gputop.vocab import budget as slices
from gputop.vocab import setup
from gputop.vocab import steps as phases

SLICE = slices.STRAGGLER

INPUTS_RATIO = 1.2
"""A rank given this many times the median rank's input elements per step has larger inputs
(sequence-length skew is 2x and more; batches of one shape differ by nothing)."""
GPU_SLOWER = 0.10
"""A rank's GPU whose SM clock is this far below the other ranks' (share of its maximum) runs
slower for that reason (clocks cut by the power cap or heat: docs/facts/bounds.md)."""
OPTIMIZER_HOLDS = 0.6
"""Share of a rank's extra compute its optimizer step holds from which that step is the cause
(inputs larger stretch forward and backward; a shard larger stretches the update)."""
COMPUTE_SPLIT = (phases.FORWARD, phases.BACKWARD, phases.OPTIMIZER)
"""The agent's phases a rank's compute is split into, against the other ranks'."""
RUNQ_MORE = 0.15
"""Seconds per second a rank's threads wait for a CPU beyond the median rank's from which its
CPUs are shared: a runnable thread that waits 15% of the time has lost that much of a core."""
OWN_WORK: tuple[str, ...] = (
    slices.COMPUTE, slices.DATA, slices.H2D, slices.EVAL, slices.CHECKPOINT, slices.LOG,
    slices.GC, slices.LOOP,
)  # fmt: skip
"""The slices of a rank's own work (not waiting for others, not standing still)."""

BALANCE = (
    "balance the work per rank: bucket samples by length so each rank's batch holds about "
    "the same tokens, or pack sequences to a fixed token count per batch"
)
OWN_CORES = (
    "give each rank cores of its own (taskset/numactl --physcpubind per rank) and move other "
    "work off them"
)
HARDWARE = advice(
    "check that rank's GPU (nvidia-smi -q -d PERFORMANCE,ECC) and its NUMA placement; swap "
    "it with another rank's GPU to see whether the slowness follows the device"
)
SIDE = {
    slices.H2D: "pin_memory=True and non_blocking copies on that rank",
    slices.EVAL: "evaluate on every rank (each a shard), or in a process of its own",
    slices.CHECKPOINT: "save asynchronously (torch.distributed.checkpoint.async_save) or "
    "shard the save across ranks",
    slices.LOG: "log from that rank less often, or from a background thread",
    slices.GC: "gc.set_threshold(50_000, 20, 20) on every rank; or gc.disable() and "
    "gc.collect() every N steps on all ranks at once",
    slices.LOOP: "move that rank's extra per-step Python off the step (every N steps, a thread)",
}
"""A lever for each part of a rank's own work that can make it the slow one."""


def _median_inputs(sig: RuleInputs, pid: int) -> float | None:
    rank = sig.steps.of(pid) if sig.steps is not None else None
    got = [s.inputs for s in rank.recent if s.inputs] if rank is not None else []
    return statistics.median(got) if got else None


def _others(ranks: Sequence[RankBudget], slow: RankBudget) -> list[RankBudget]:
    return [r for r in ranks if r.pid != slow.pid]


def _runq(sig: RuleInputs, pid: int) -> float | None:
    procs = sig.host.process_cpu if sig.host is not None else ()
    return next((p.runq for p in procs if p.pid == pid), None)


def _gpu_of(sig: RuleInputs, pid: int) -> tuple[int, GpuSignals] | None:
    """The GPU NVML lists ``pid`` on (its own readings), None when not listed or one GPU."""
    board = sig.gpu.per_gpu if sig.gpu is not None else ()
    return next(((i, g) for i, g in board if pid in g.pids), None)


def _gpu_cause(
    sig: RuleInputs, name: str, mine: RankBudget, others: list[RankBudget], longer: str
) -> Cause | None:
    """Its GPU runs slower than the other ranks' (clock cut, power cap or heat), or another
    process outside the job computes on it."""
    own = _gpu_of(sig, mine.pid)
    if own is None:
        return None
    i, g = own
    theirs = [x for r in others if (x := _gpu_of(sig, r.pid)) is not None and x[0] != i]
    job = {p.pid for p in sig.host.process_cpu} if sig.host is not None else set()
    job |= {r.pid for r in (mine, *others)}
    strangers = sorted(g.pids - job) if job else []
    clocks = [t.clock_ratio for _, t in theirs if t.clock_ratio is not None]
    if clocks and g.clock_ratio is not None:
        typical = statistics.median(clocks)
        if typical - g.clock_ratio >= GPU_SLOWER:
            why = "power cap" if g.power_throttled >= g.thermal_throttled else "heat"
            held = max(g.power_throttled, g.thermal_throttled)
            return Cause(
                f"{name}'s GPU {i} runs slower: SM clock at {g.clock_ratio:.0%} of its maximum "
                f"(the others' {typical:.0%}; {why} {held:.0%} of the time): {longer}",
                (Evidence(f"GPU {i} (pid {mine.pid}) clock {g.clock_ratio:.0%} of max, the "
                          f"others {typical:.0%} (>= {GPU_SLOWER:.0%} lower)", "NVML"),),
                (HARDWARE,),
            )  # fmt: skip
    if strangers:
        return Cause(
            f"{name}'s GPU {i} is shared: pid {strangers[0]}, not of the job, computes on it "
            f"too: {longer}",
            (Evidence(f"NVML lists pid {', '.join(map(str, strangers[:3]))} on GPU {i} beside "
                      f"pid {mine.pid}", "NVML"),),
            (f"move pid {strangers[0]} off GPU {i} (or the job to GPUs of its own: "
             "CUDA_VISIBLE_DEVICES)",),
        )  # fmt: skip
    return None


def find(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """The slowest rank's cause, None when no rank is slower (or its work was not timed)."""
    work = sig.steps.rank_work if sig.steps is not None else None
    slow = work.slowest if work is not None else None
    return straggler_cause(sig, budget, slow) if slow is not None else None


def straggler_cause(sig: RuleInputs, budget: Budget | None, slow: Slowest) -> Cause | None:
    """The cause of ``slow``'s extra work, or None when its budget or the others' is not known
    (no agent on it, a rank the budget does not have)."""
    if budget is None or slow.row.pid is None:
        return None
    mine = next((r for r in budget.ranks if r.pid == slow.row.pid), None)
    others = _others(budget.ranks, mine) if mine is not None else []
    if mine is None or not others:
        return None
    step = slow.step_ms
    name = f"rank {slow.row.name}"

    def typical(s: str) -> float:
        return statistics.median(r.shares[s] for r in others) * step

    extra = {s: mine.shares[s] * step - typical(s) for s in OWN_WORK}
    top = max(extra, key=lambda s: extra[s])
    cause = _part_cause(sig, name, mine, others, top, extra[top], typical, step)
    spread = mine.errors.get(top, 0.0) * step
    return _sized(cause, budget, extra[top], spread, name)


def _sized(cause: Cause, budget: Budget, extra_ms: float, spread_ms: float, name: str) -> Cause:
    """The cause's levers sized by the rank differential: a lever that takes the slow rank's
    extra time away shortens the others' wait for it by that much, up to all of the wait (the
    straggler slice of the typical rank's step). The range: the extra less and plus its
    sampling error."""
    r = budget.typical
    wait_ms = budget.share(SLICE) * r.seconds / r.steps * 1000 if r.steps else 0.0
    if wait_ms <= 0 or extra_ms <= 0:
        return cause
    part = min(1.0, extra_ms / wait_ms)
    band = ((extra_ms - spread_ms) / wait_ms, (extra_ms + spread_ms) / wait_ms)
    said = f"if {name}'s extra {extra_ms:.0f} ms a step went (the others wait {wait_ms:.0f} ms)"
    return replace(cause, levers=tuple(_of_extra(x, part, band, said) for x in cause.levers))


def _of_extra(x: str, part: float, band: tuple[float, float], said: str) -> str:
    """A lever sized as the share ``part`` of the wait; one its cause sized already
    (``Lever.removes``: the share of the slow rank's extra it takes away, as a worker that
    finds no free CPU) keeps that share of it, and says why."""
    if isinstance(x, Lever) and x.advice:
        return x
    keeps = x.removes if isinstance(x, Lever) and x.removes is not None else 1.0
    if keeps < 1.0 and isinstance(x, Lever) and x.condition:
        said = f"{said}; {x.condition}"
    return sized(x, SLICE, part * keeps, (band[0] * keeps, band[1] * keeps), said)


def _part_cause(
    sig: RuleInputs, name: str, mine: RankBudget, others: list[RankBudget], top: str,
    extra_ms: float, typical: Callable[[str], float], step: float,
) -> Cause:  # fmt: skip
    """The cause of the part of its own work (``top``) that is longer than the others'
    (``step``: the slow rank's step, ms)."""
    if top == slices.DATA:  # below the slice: who makes its batches, against the others
        return data_cause(sig, name, mine.pid, [r.pid for r in others], extra_ms,
                          mine.shares[top] * step, typical(top), step)  # fmt: skip
    if top != slices.COMPUTE:
        return Cause(
            f"{name}: {slices.NAMES[top]} takes {extra_ms:.0f} ms a step more than on the "
            f"other ranks ({mine.shares[top] * step:.0f} vs {typical(top):.0f} ms)",
            (
                Evidence(
                    f"{name}: {slices.NAMES[top]} {mine.shares[top]:.0%} of its step, the "
                    f"others {typical(top) / step:.0%}",
                    mine.source,
                ),
            ),
            (SIDE[top],),
        )
    return _compute_cause(sig, name, mine, others, extra_ms, typical(slices.COMPUTE))


MAX_SHARERS_NAMED = 2
"""Processes outside the job named in the cause line (the evidence lists each)."""


def _sharers(sig: RuleInputs, pid: int) -> list[Sharer]:
    """The busy processes outside the job that may run on ``pid``'s CPUs, busiest first."""
    found = sig.host.sharers if sig.host is not None else ()
    return [x for x in found if pid in x.shares_with]


def _sharer(x: Sharer) -> str:
    cmd = f" ({printable(x.cmdline, 60)})" if x.cmdline else f" ({x.name})"
    return f"pid {x.pid}{cmd} {x.cores:.0%} of a core"


def _inputs_cause(
    name: str, longer: str, own_in: float | None, their_in: list[float]
) -> tuple[Cause, float] | None:
    """Its inputs are larger, with the stretch they explain (their ratio)."""
    typical_in = statistics.median(their_in) if their_in else 0.0
    if own_in is None or typical_in <= 0 or own_in < INPUTS_RATIO * typical_in:
        return None
    times = own_in / typical_in
    return Cause(
        f"{name}'s inputs are {times:.1f}x the others': {longer} ({own_in:,.0f} vs "
        f"{typical_in:,.0f} tensor elements a step)",
        (Evidence(f"{name} is given {own_in:,.0f} input elements a step, the median rank "
                  f"{typical_in:,.0f}", "agent"),),
        (BALANCE,),
    ), times  # fmt: skip


def _stretch(sig: RuleInputs, pid: int) -> float | None:
    """(CPU used + run-queue wait) / CPU used: how much longer its work takes for the CPUs
    it waits for."""
    procs = sig.host.process_cpu if sig.host is not None else ()
    p = next((p for p in procs if p.pid == pid), None)
    if p is None or not p.cores or p.runq is None:
        return None
    return (p.cores + p.runq) / p.cores


def _cpu_cause(
    sig: RuleInputs, name: str, longer: str, mine: RankBudget, others: list[RankBudget]
) -> tuple[Cause, float] | None:
    """Its threads wait for CPUs more than the others', with the stretch that explains and the
    processes outside the job on its CPUs."""
    own_q = _runq(sig, mine.pid)
    their_q = [q for r in others if (q := _runq(sig, r.pid)) is not None]
    if own_q is None or not their_q or own_q - statistics.median(their_q) < RUNQ_MORE:
        return None
    typical_q = statistics.median(their_q)
    own_x = _stretch(sig, mine.pid) or 1.0
    their_x = [x for r in others if (x := _stretch(sig, r.pid)) is not None]
    times = own_x / statistics.median(their_x) if their_x else own_x
    sharers = _sharers(sig, mine.pid)
    named = ", ".join(_sharer(x) for x in sharers[:MAX_SHARERS_NAMED])
    evidence = [
        Evidence(f"{name} run-queue wait {own_q:.2f} s/s vs {typical_q:.2f} (>= {RUNQ_MORE:g} "
                 f"more): its work {times:.1f}x as long for it", "host"),
        *(Evidence(f"outside the job on {name}'s CPUs: {_sharer(s)}", "host") for s in sharers),
    ]  # fmt: skip
    levers: tuple[str, ...] = (OWN_CORES,)
    if sharers:
        top = sharers[0]
        levers = (
            f"move pid {top.pid} ({top.name}) off {name}'s CPUs (taskset -apc CPUS {top.pid}) "
            "or stop it",
            OWN_CORES,
        )
    text = (
        f"{name}'s CPUs are shared: {longer}, its threads wait {own_q:.2f} s a second for a "
        f"CPU (the others {typical_q:.2f})" + (f"; on them: {named}" if named else "")
    )
    return Cause(text, tuple(evidence), levers), times


def _compute_cause(
    sig: RuleInputs, name: str, mine: RankBudget, others: list[RankBudget], extra_ms: float,
    typical_ms: float,
) -> Cause:  # fmt: skip
    """Its compute is the longer part: larger inputs, a slower GPU, shared CPUs, else its
    hardware. Inputs and shared CPUs may both differ: the one that explains more of the
    stretch leads (inputs stretch compute by their ratio; a CPU shared stretches a rank's
    work by (used + waited) / used against the others'), the other is evidence beside it."""
    ratio = (typical_ms + extra_ms) / typical_ms if typical_ms > 0 else None
    longer = f"its compute takes {ratio:.1f}x theirs" if ratio else "its compute is longer"
    parts = _compute_parts(sig, mine.pid, [r.pid for r in others])
    split = (Evidence(f"{name}'s compute against the median other rank's: " + ", ".join(
        f"{n} {mine_ms:.0f} vs {their_ms:.0f} ms" for n, mine_ms, their_ms in parts), "agent"),
    ) if parts else ()  # fmt: skip
    cause = _compute_part_cause(sig, name, mine, others, extra_ms, typical_ms, parts, longer)
    first, rest = cause.evidence[:1], cause.evidence[1:]  # the split after the cause's own
    return replace(cause, evidence=(*first, *split, *rest))


def _compute_parts(sig: RuleInputs, pid: int, others: list[int]) -> list[tuple[str, float, float]]:
    """(phase, this rank's median ms a step, the median other rank's) for forward, backward
    and the optimizer step, from the agents' phases; empty where either was not timed."""

    def median(p: int, phase: str) -> float | None:
        rank = sig.steps.of(p) if sig.steps is not None else None
        got = [s.phases.get(phase, 0) / 1e6 for s in rank.recent] if rank is not None else []
        return statistics.median(got) if got else None

    out = []
    for phase in COMPUTE_SPLIT:
        own = median(pid, phase)
        theirs = [x for p in others if (x := median(p, phase)) is not None]
        if own is not None and theirs:
            out.append((phase, own, statistics.median(theirs)))
    return out if any(own or their for _, own, their in out) else []


def _optimizer_cause(
    sig: RuleInputs, name: str, parts: list[tuple[str, float, float]], extra_ms: float
) -> Cause | None:
    """Its optimizer step holds most of its extra compute: the same model and batch, a longer
    update (more parameters or optimizer state in its shard, a step the others skip)."""
    gaps = {n: own - their for n, own, their in parts}
    opt = gaps.get(phases.OPTIMIZER, 0.0)
    if extra_ms <= 0 or opt < OPTIMIZER_HOLDS * extra_ms or opt < max(gaps.values()):
        return None
    own, their = next((o, t) for n, o, t in parts if n == phases.OPTIMIZER)
    lever = (
        "balance the optimizer's shards: partition the parameters by size (not by layer "
        "count) so each rank updates about as many"
        if _sharded(sig)
        else "look at what that rank's optimizer step does that the others' do not (a "
        "parameter group only it holds, a clip or EMA update run on one rank)"
    )
    return Cause(
        f"{name}'s optimizer step takes {opt:.0f} ms a step more than the others' ({own:.0f} "
        f"vs {their:.0f} ms): its forward and backward match theirs",
        (),
        (lever,),
    )


SHARDING = (setup.FSDP1, setup.FSDP2, setup.DEEPSPEED)
"""Wrappers that shard the optimizer's state across ranks."""
SHARDING_CALLERS = ("ZeroRedundancyOptimizer", "FSDP", "DeepSpeed")
"""Collective callers (``agent/callers.py``) that shard it."""


def _sharded(sig: RuleInputs) -> bool:
    """The job shards its optimizer: its wrapper does, or a sharding optimizer issues its
    collectives (a ZeroRedundancyOptimizer under plain DDP)."""
    st = sig.steps
    if st is None:
        return False
    if parallel_kind(st.fingerprint) in SHARDING:
        return True
    return any(k.startswith(SHARDING_CALLERS) for a in st.agents for s in a.steps[-8:]
               for k in s.comm_by)  # fmt: skip


def _compute_part_cause(
    sig: RuleInputs, name: str, mine: RankBudget, others: list[RankBudget], extra_ms: float,
    typical_ms: float, parts: list[tuple[str, float, float]], longer: str,
) -> Cause:  # fmt: skip
    """The longer compute's cause: an optimizer step longer than the others' (its forward
    and backward equal), else larger inputs, a slower GPU, shared CPUs, its hardware."""
    opt = _optimizer_cause(sig, name, parts, extra_ms)
    if opt is not None:
        return opt
    own_in = _median_inputs(sig, mine.pid)
    their_in = [x for r in others if (x := _median_inputs(sig, r.pid)) is not None]
    inputs = _inputs_cause(name, longer, own_in, their_in)
    cpus = _cpu_cause(sig, name, longer, mine, others)
    if inputs is not None and cpus is not None:
        (lead, _), (beside, _) = sorted((inputs, cpus), key=lambda c: c[1], reverse=True)
        also = tuple(Evidence(f"also: {e.text}", e.source) for e in beside.evidence[:1])
        return replace(lead, evidence=(*lead.evidence, *also))
    if inputs is not None:
        return inputs[0]
    gpu = _gpu_cause(sig, name, mine, others, longer)
    if gpu is not None:
        return gpu
    if cpus is not None:
        return cpus[0]
    same = "the same inputs" if own_in is not None and their_in else "inputs not counted"
    return Cause(
        f"{name}: {longer} with {same} and no wait for a CPU: its hardware or placement",
        (),
        (HARDWARE,),
    )
