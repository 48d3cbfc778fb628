"""One small rule per bound class of domain.md. Each takes the reduced signals and returns a
Finding: fired or not, with the numbers and thresholds behind it, where they came from, and a
confidence from how many independent sources agree. Its entry in ``bounds.py`` places it in
the verdict's order and adds the bound's levers when it fires.

Thresholds are the documented rules of thumb (domain.md, research/), module constants that the
evidence text is formatted from: shown next to the numbers so a user can disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gputop.diagnose.findings import WARMING_UP, Evidence, Finding, confidence
from gputop.diagnose.signals import (
    CPU_SPAN_S,
    MEM_NEAR,
    RECENT_S,
    SPIKE,
    WORKER_PEGGED,
    WORKERS_COMPUTE,
    GpuSignals,
    HostSignals,
    ProcessCpu,
    RuleInputs,
    StackSignals,
    StepSignals,
)
from gputop.model.ranks import STRAGGLER_EXCESS
from gputop.model.stack_stats import OwnCode, Stillness, in_stdlib
from gputop.model.stacks import Frame
from gputop.vocab import stacks as stack
from gputop.vocab import steps as step

DATA_WAIT_WARN = 0.05
"""Batch wait over this share of the step starves the GPU (domain.md: target < 5%)."""
COMMS_SHARE = 0.20
"""Gradient sync over this share of the step is comms-bound (domain.md)."""
H2D_SHARE = 0.10
"""Host-to-device copies over this share of the step are on the critical path."""
SIDE_SHARE = 0.10
"""Checkpoint, logging or garbage collection over this share of step time."""
STACK_SHARE = 0.30
"""Main threads in one kind of wait in over this share of stack samples."""
GPU_BUSY = 90.0
"""Mean GPU utilisation (%) from which the GPU counts as busy all the time."""


def _finding(
    bound: str,
    agree: list[Evidence],
    against: list[Evidence],
    missing: list[str],
    summary: str,
    impact: float = 0.0,
    need: int = 1,
) -> Finding:
    sources = {e.source for e in agree}
    fired = len(agree) >= need and len(sources) >= 1
    return Finding(
        bound=bound,
        fired=fired,
        confidence=confidence(len(sources), len(missing)) if fired else 0.0,
        summary=summary,
        evidence=tuple(agree + against),
        missing=tuple(missing),
        impact=impact,
    )


def _size(n: float) -> str:
    """GiB with one decimal, MiB below 2 GiB (a 290-MiB limit is not "0.3 GiB")."""
    return f"{n / 2**30:.1f} GiB" if n >= 2 * 2**30 else f"{n / 2**20:.0f} MiB"


def pct(x: float) -> str:
    """A share as a percentage: whole numbers, one decimal under 10% where it matters (a 3.5%
    band is not "4%")."""
    v = 100 * x
    return f"{v:.1f}%" if v < 10 and abs(v - round(v)) >= 0.05 else f"{v:.0f}%"


HOLD = 0.7
"""The band of a threshold: a rule fires when its number crosses X and, while its bound is the
principal the verdict shows (``RuleInputs.holding``), keeps firing until the number falls
under HOLD * X. A share near its threshold (spikes entering and leaving the window, a GPU
mean around 90%) then does not flip the verdict on every reading; the value shown is the
threshold in force, so the evidence says which one applied."""


def _band(threshold: float, sig: RuleInputs, *bounds: str) -> float:
    """The threshold in force: lowered to HOLD of itself while one of ``bounds`` is held."""
    return threshold * HOLD if sig.holding is not None and sig.holding in bounds else threshold


STACK_MIN = 5
"""Stack samples (dumps, one a second) a share needs before a rule reads it: one dump of five
is 20%, one of one is 100%."""


def _stack_shares(sig: RuleInputs) -> dict[str, float] | None:
    """The main threads' phase shares, once there are STACK_MIN samples of them."""
    st = sig.stacks
    if st is None or st.samples < STACK_MIN:
        return None
    return st.main_shares


STEPS_SEEN = 3
"""Steps the agent must have seen before the job has a cadence (a first batch may take long)."""
HANG_FLOOR_S = 10.0
"""No progress for less than this is never a hang: a stack unchanged across ten dumps at one
a second, long enough that a slow step shows itself moving."""
HANG_K = 3
"""...nor for less than HANG_K times the job's own longest normal wait: its 99th-percentile
step by the agent's clock, or without the agent the longest pause its main thread showed in
the stack window. Three: a step's tail on a shared, busy machine stretches to about twice its
p99 (domain.md's "many median step times", taken against the tail so a job with a periodic
slow step is judged against that step); the confirmation below (no CPU, no writes, no stack
moving) is what separates a hang from slowness, so the factor need only cover waits that are
as long as the job's own."""
PARKED_S = 9.0
"""Span of unchanged stacks that confirms the agent's missing steps: ten dumps a second apart."""
HANG_FIRST_S = 30.0
FIRST_STEP_WAITS = frozenset({stack.COLLECTIVE_WAIT, stack.DATA_WAIT})
"""Before its first steps (its agent has seen none) a rank waiting to meet the others or for
its first batch may wait long legitimately (late ranks, a cold dataset): a parked, quiet
process there counts as hung only after HANG_FIRST_S. Parked anywhere else (backward, a lock,
an event), an agent with no steps has been loaded into a job already stuck: the floor holds."""
HANG_AGENT_ONLY_S = 60.0
"""With the agent's clock alone (no stacks, no CPU readings) nothing shows that the process is
not working through one long step: a hang needs this long."""
QUIET_CPU = 0.1
"""CPU (cores) under which a process is doing nothing: a blocked process measures ~0, a
helper thread that wakes ten times a second ~0.01; any real work is tenths of a core."""
WRITING = 1e6
"""Bytes/s written to storage from which a quiet process is still working (a checkpoint on a
slow disk waits in write, idle, but its bytes move)."""
MAIN_MOVING = 0.001
"""CPU (cores) of a main thread from which it is not blocked, however still its stack: 1 ms a
second. A thread blocked in a lock, a queue, a pipe or a socket uses none (measured 0.00 ms/s
in every hang of the corpus; a DataLoader's 5-s status check, microseconds), while one that
wakes for each batch of a slow loader (remote reads: 24 wakeups and 4 ms a second) sits on the
same line at every dump yet trains. A poll every few ms would pass for work: a missed hang
rather than a false one."""
POLLING = frozenset({stack.HOST_SYNC, stack.COLLECTIVE_WAIT})
"""Waits that may poll or spin while stuck (a CUDA sync, NCCL's blocking wait): their main
thread's CPU is no sign of progress."""
IDLE_DUMPS = 0.7
"""Without CPU readings, the share of dumps py-spy must judge the thread idle in."""
SPINS = stack.HOST_SYNC
"""A thread in an explicit CUDA sync may spin on a core while it waits (CUDA's default
scheduling spins when there are more cores than contexts), and a hung NCCL kernel keeps the GPU
at 100%: its CPU time and the GPU's are no sign of work, only the cadence tells a long kernel
from a hang."""


def at(f: Frame | None) -> str:
    """file:line of a frame, as findings and levers name places."""
    return f"{f.file}:{f.line}" if f and f.line else (f.file if f else "?")


def _name(f: Frame) -> str:
    """A function as a user knows it: subprocess.run, Queue.get, train_step."""
    module = f.file.rsplit("/", 1)[-1].removesuffix(".py")
    return f"{module}.{f.name}" if in_stdlib(f) and "." not in f.name else f.name


def _where(phase: str, leaf: Frame | None, caller: Frame | None, ranks: int) -> str:
    """'blocked in Queue.get at train.py:41': the frame it waits in and the code that called."""
    if phase == stack.BACKWARD and ranks > 1:
        return f"in backward (where DDP's gradient all-reduce waits) at {at(caller)}"
    if leaf is None:
        return f"in {phase}"
    verb = "waits" if phase in (stack.COLLECTIVE_WAIT, stack.DATA_WAIT) else "blocked"
    if caller == leaf:  # its own line waits (`with lock:`, a C call): the line says what
        return f"{verb} at {at(leaf)} in {_name(leaf)}"
    return f"{verb} in {_name(leaf)} at {at(caller or leaf)}"


def _label(p: Stillness) -> str:
    return f"rank {p.rank} (pid {p.pid})" if p.rank is not None else f"pid {p.pid}"


def _in_collective(m: Stillness, ranks: int) -> bool:
    """In a collective: its frame, or (more than one rank) parked inside backward, where DDP's
    all-reduce of the gradients blocks in C++ with no Python frame of its own."""
    return m.phase == stack.COLLECTIVE_WAIT or (m.phase == stack.BACKWARD and ranks > 1)


def _doing_nothing(p: ProcessCpu | None, idle_share: float | None = None) -> bool:
    """Doing nothing: under QUIET_CPU and not writing, or (no CPU readings) idle by py-spy."""
    if p is not None and p.cores is not None:
        return p.cores < QUIET_CPU and p.write_rate < WRITING
    return idle_share is not None and idle_share >= IDLE_DUMPS


def _main_moves(p: ProcessCpu | None) -> bool:
    return p is not None and p.main_thread is not None and p.main_thread >= MAIN_MOVING


def _tree_quiet(h: HostSignals) -> Evidence:
    n = len(h.process_cpu)
    which = f"all {n} processes of the job" if n > 1 else "the job's only process"
    return Evidence(
        f"{which} under {QUIET_CPU:g} core of CPU and not writing, over the last "
        f"{CPU_SPAN_S:.0f} s",
        "host",
    )


def _who_waits(still: Sequence[Stillness], ranks: int) -> str:
    """The sentence that names the stuck processes: who is in a collective and who is not."""
    inside = [m for m in still if _in_collective(m, ranks)]
    outside = [m for m in still if not _in_collective(m, ranks)]
    if inside and outside:
        coll = inside[0].leaf.name if inside[0].leaf and inside[0].phase == stack.COLLECTIVE_WAIT \
            else "gradient all-reduce"  # fmt: skip
        who = ", ".join(_label(m) for m in inside)
        o = outside[0]
        verb = "wait" if len(inside) > 1 else "waits"
        where = _where(o.phase, o.leaf, o.caller, ranks)
        return f"{_label(o)} is not in the {coll} that {who} {verb} in: it is {where}"
    m = outside[0] if outside else inside[0]
    if inside and ranks > 1 and not outside:
        return f"every rank waits in a collective ({_where(m.phase, m.leaf, m.caller, ranks)})"
    return f"{_label(m)} {_where(m.phase, m.leaf, m.caller, ranks)}"


def _trainers(sk: StackSignals | None) -> tuple[list[Stillness], int]:
    """(the main or rank threads whose stillness decides a hang, how many ranks): the ranks
    when there are some, not a launcher (torchrun, spawn's parent) that only waits for them."""
    still = list(sk.still) if sk is not None else []
    trains = [m for m in still if m.role == "rank" or m.rank is not None or _in_collective(m, 1)]
    return trains or still, len(trains)


def _parked(m: Stillness, cpu: dict[int, ProcessCpu]) -> bool:
    """The thread's process does nothing (or it spins in a CUDA sync), and its main thread does
    not wake to work (a slow feed sits on one line at every dump too)."""
    if m.phase == SPINS:
        return True
    p = cpu.get(m.pid)
    return _doing_nothing(p, m.idle_share) and (m.phase in POLLING or not _main_moves(p))


def _rest_quiet(evidence: Sequence[Stillness], cpu: dict[int, ProcessCpu]) -> bool:
    """Every process of the tree quiet, but those spinning in a CUDA sync."""
    spinning = {m.pid for m in evidence if m.phase == SPINS}
    return all(_doing_nothing(p) for p in cpu.values() if p.pid not in spinning)


def _has_cadence(st: StepSignals | None) -> bool:
    return st is not None and st.steps >= STEPS_SEEN and st.since_step_s is not None


def _step_limit(st: StepSignals) -> float:
    """No step for longer than this is no progress by the agent's clock."""
    return max(HANG_FLOOR_S, HANG_K * st.p99_ms / 1000)


def _still_limit(m: Stillness, st: StepSignals | None) -> float:
    """Without the agent's cadence, how long this thread must stand on one stack."""
    if st is not None and m.phase in FIRST_STEP_WAITS:
        return HANG_FIRST_S  # no step yet: ranks meeting, a first batch coming
    return max(HANG_FLOOR_S, HANG_K * (m.before_s or 0))


STALL_NOTE_S = 5.0
"""Seconds of no progress from which the verdict says so before a hang is called: the previous
principal's evidence has gone (the CPU fell), and "no bound stands out" would hide why."""


def stalling(sig: RuleInputs) -> str | None:
    """The note for a job that has stopped moving for STALL_NOTE_S but not yet for its hang
    limit: who waits where, and when it will count as hung. None otherwise."""
    sk, h, st = sig.stacks, sig.host, sig.steps
    if sk is None or h is None or h.exited or not h.process_cpu:
        return None
    if st is not None and st.since_step_s is not None and st.since_step_s < STALL_NOTE_S:
        return None
    evidence, ranks = _trainers(sk)
    cpu = {p.pid: p for p in h.process_cpu}
    if not evidence or any(m.still_s < STALL_NOTE_S or not _parked(m, cpu) for m in evidence):
        return None
    if not _rest_quiet(evidence, cpu):
        return None
    for_s = min(m.still_s for m in evidence)
    if _has_cadence(st):
        assert st is not None
        limit = _step_limit(st)
    else:
        limit = max(_still_limit(m, st) for m in evidence)
    return (
        f"no progress for {for_s:.0f} s: {_who_waits(evidence, ranks)} (hung after {limit:.0f} s)"
    )


def hung(sig: RuleInputs) -> Finding:
    """No progress for longer than the job's own cadence, confirmed by every process of the
    tree: each main or rank thread on one stack (any frame, user code included) and no process
    using CPU or writing. A long checkpoint, an eval pass or a slow step moves (its stack, its
    CPU, its bytes), so it is never a hang. Without the agent the cadence is the job's longest
    pause in the stack window; without stacks, the agent's clock and the CPU readings."""
    st, sk, h = sig.steps, sig.stacks, sig.host
    missing = [name for name, v in (("agent", st), ("stacks", sk), ("host", h)) if v is None]
    agree: list[Evidence] = []
    no = _finding("hung", [], [], missing, "no progress: the job is stuck")
    if h is not None and h.exited:
        return no  # an exit is not a hang (the exit says why)
    if st is not None and st.agents and all(a.state == "exited" for a in st.agents):
        return no  # every agent said goodbye: the job ended, whatever the host source still has
    cadence = _has_cadence(st)
    if cadence:
        assert st is not None and st.since_step_s is not None
        limit = _step_limit(st)
        if st.since_step_s <= limit:
            return no  # steps finish: progress
        where = f" in {st.open_phase}" if st.open_phase else ""
        agree.append(
            Evidence(
                f"no step for {st.since_step_s:.0f} s{where} (limit max({HANG_FLOOR_S:g} s, "
                f"{HANG_K}x its slowest steps {st.p99_ms:.0f} ms))",
                "agent",
            )
        )
    cpu = {p.pid: p for p in h.process_cpu} if h is not None else {}
    evidence, ranks = _trainers(sk)
    if not evidence:  # nothing to confirm with: the agent's clock and the CPU readings
        if not cadence:
            return no
        assert st is not None and st.since_step_s is not None
        if h is not None and h.process_cpu:
            if not all(_doing_nothing(p) for p in h.process_cpu):
                return no
            agree.append(_tree_quiet(h))
        elif st.since_step_s <= HANG_AGENT_ONLY_S:
            return no
        return _finding("hung", agree, [], missing, "no progress: the job is stuck", impact=1.0)
    for m in evidence:  # a launcher (torchrun, spawn's parent) need only be quiet, below
        need = PARKED_S if cadence else _still_limit(m, st)
        if m.still_s < need or not _parked(m, cpu):
            return no  # this one still moves or works: the others wait on it, or it is slow
    if not _rest_quiet(evidence, cpu):
        return no  # a worker, child or helper still computes or writes: slow, not stuck
    for m in evidence:
        cores = cpu.get(m.pid)
        use = f", CPU {cores.cores:.2f} cores" if cores and cores.cores is not None else ""
        agree.append(
            Evidence(
                f"{_label(m)} {_where(m.phase, m.leaf, m.caller, ranks)}: same stack for "
                f"{m.still_s:.0f} s ({m.dumps} dumps){use}",
                "stacks",
            )
        )
    if sk is not None and sk.workers_at and h is not None:
        leaf, caller = sk.workers_at[0][1], sk.workers_at[0][2]
        seen = f", last seen in {leaf.name} at {at(caller or leaf)}" if leaf else ""
        n = len(sk.workers_at)
        agree.append(Evidence(f"{n} DataLoader worker{'s' if n > 1 else ''} idle too{seen}",
                              "host"))  # fmt: skip
    if h is not None and h.process_cpu:
        agree.append(_tree_quiet(h))
    summary = "no progress: " + _who_waits(evidence, ranks)
    return _finding("hung", agree, [], missing, summary, impact=1.0)


MEM_PRESSURE = 10.0
"""PSI memory "some" avg10 (%): time some task stalled on reclaim."""
LIMIT_HITS = 0.5
"""Times per second the cgroup hits its memory limit from which the kernel is reclaiming."""
DATA_BOUNDS = ("data-input", "data-input/cpu-transform", "data-input/io")


def host_memory_pressure(sig: RuleInputs) -> Finding:
    """Memory near the cgroup limit. It explains a slow loader when the loader is what fills
    it (DataLoader workers, each with its own copy of the dataset) or when reclaim stalls the
    job: there the data-input levers (more workers, more prefetch) would add memory and end in
    an OOM kill."""
    h = sig.host
    if h is None:
        return _finding("host-memory-pressure", [], [], ["host"], "memory near the limit")
    if h.exited:  # the kills are why it is gone: say so rather than "nothing is training"
        kills = [Evidence(f"{h.oom_kills} OOM kill(s) in the cgroup, then the target exited",
                          "host")] if h.oom_kills else []  # fmt: skip
        return _finding(
            "host-memory-pressure", kills, [], [], "the OOM killer ended the job", impact=1.0
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
                f"working set {_size(h.mem_working_set)} of {_size(h.mem_limit)} limit "
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
    f = _finding(
        "host-memory-pressure",
        agree,
        against,
        [],
        "memory near the cgroup limit",
        impact=0.5 if agree else 0.0,
    )
    if f.fired and (h.oom_kills or (near and (h.workers or stalled))):
        f = replace(f, explains=DATA_BOUNDS)
    return f


THERMAL_SHARE = 0.3
"""Share of busy time with a thermal clock-event reason from which heat is cutting clocks."""
THERMAL_CLOCK = 0.95
"""SM clock over its max below which the thermal reasons are cutting it."""
SLOWDOWN_MARGIN_C = 2
"""Degrees under the board's slowdown temperature that count as at it."""


def throttled_thermal(sig: RuleInputs) -> Finding:
    g = sig.gpu
    if g is None:
        return _finding("throttled-thermal", [], [], ["NVML"], "clocks cut by heat")
    agree = []
    if g.thermal_throttled >= THERMAL_SHARE:
        share = pct(g.thermal_throttled)
        text = f"thermal clock reasons {share} of busy time (>= {pct(THERMAL_SHARE)})"
        agree.append(Evidence(text, "NVML"))
    temps = g.hottest is not None and g.slowdown is not None
    if temps and g.hottest >= g.slowdown - SLOWDOWN_MARGIN_C:
        agree.append(Evidence(f"{g.hottest:.0f} C, slowdown at {g.slowdown} C", "NVML"))
    fired_clock = g.clock_ratio is not None and g.clock_ratio < THERMAL_CLOCK
    fired = fired_clock or len(agree) > 1
    against = [] if fired and agree else [_thermal_numbers(g)]
    return _finding(
        "throttled-thermal",
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
        return _finding("throttled-power", [], [], ["NVML"], "clocks cut by the power limit")
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
    return _finding(
        "throttled-power",
        agree,
        against,
        [],
        "clocks cut to stay under the power limit",
        impact=1 - (g.clock_ratio or 1),
    )


def straggler(sig: RuleInputs) -> Finding:
    """One rank works longer than the median rank: the definition and its numbers are the
    model's (``model.ranks``, as the ranks pane, /metrics and the report read them)."""
    st = sig.steps
    slow = st.rank_work.slowest if st is not None and st.rank_work is not None else None
    if slow is None:
        return _finding("straggler", [], [], [] if st else ["agent"], "one rank slower")
    agree = []
    # the model's definition, with the band while straggler is shown: data skew varies from
    # batch to batch, and a median excess near 10% would hand the verdict to the comms wait
    # it causes and back
    need = _band(STRAGGLER_EXCESS, sig, "straggler")
    if slow.step_ms and slow.exceeds(need):
        agree.append(
            Evidence(
                f"rank {slow.row.name} works {slow.row.work_ms:.0f} ms per step vs median "
                f"{slow.median_work_ms:.0f} ms (>= {pct(need)} of the "
                f"{slow.step_ms:.0f} ms step)",
                "agent",
            )
        )
    return _finding(
        "straggler",
        agree,
        [],
        [],
        f"rank {slow.row.name} is slower; the others wait",
        impact=slow.excess_of_step,
    )


def comms(sig: RuleInputs) -> Finding:
    agree, missing = [], []
    share = None
    limit, stacks_limit = _band(COMMS_SHARE, sig, "comms"), _band(STACK_SHARE, sig, "comms")
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
    return _finding(
        "comms",
        agree,
        [],
        missing,
        "time waiting for gradient communication",
        impact=share or 0.0,
    )


IO_PRESSURE = 10.0
"""PSI io "some" avg10 (%): time some task waited on storage."""
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


GPU_STARVED = 50.0
"""Mean GPU utilisation (%) below which a slow loader shows on the GPU too."""
MAIN_COMPUTING = 0.5
"""CPU (cores) of the main process from which it computes its batches rather than waits."""
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
    try:
        return int(threads) if threads is not None else None
    except (TypeError, ValueError):
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
    band = {"cpu-oversubscribed": HOLD, "data-input/cpu-transform": 1 / HOLD}.get(
        sig.holding or "", 1.0
    )
    excess = h.threads_running - h.effective_cpus
    return (
        h.pool_threads > band * POOL_OF_CPUS * h.effective_cpus
        and h.pool_threads >= band * POOL_OF_EXCESS * excess
    )


def _transforming(h: HostSignals, sig: RuleInputs) -> bool:
    """DataLoader workers that compute: every one pegged, or on average wanting at least
    WORKERS_COMPUTE of a core (CPU used plus time queued for one: on shared or saturated cores
    a computing worker gets less than it wants, but it still wants it)."""
    need = _band(WORKERS_COMPUTE, sig, "data-input/cpu-transform")
    return bool(h.workers) and (
        h.workers_pegged == h.workers
        or (h.workers_busy or 0) >= need
        or (h.workers_demand or 0) >= need
    )


KERNEL_READS = 0.4
"""Share of the loader's CPU spent in the kernel from which its work is reading, not
transforming: a transform runs in user space (a few % system time), while a loader that opens,
stats and reads many small files spends most of its CPU in those syscalls, even when the page
cache serves them (domain.md's data-input/io: the workers "sit in read"; the lever is fewer,
larger files, not a cheaper transform)."""
LOADER_BUSY = 0.2
"""CPU (cores per loader process) from which the kernel share is read: an idle loader's few
system calls are no bottleneck."""


def _kernel_reads(h: HostSignals, sig: RuleInputs) -> Evidence | None:
    """The loader's CPU goes mostly to system calls (KERNEL_READS): evidence, else None."""
    share = h.loader_kernel
    need = _band(KERNEL_READS, sig, "data-input/io")
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
    agree, against, missing = [], [], []
    share = None
    held = ("data-input", "data-input/cpu-transform", "data-input/io")
    warn = _band(DATA_WAIT_WARN, sig, *held)
    if sig.steps is not None and sig.steps.shares:
        share = sig.steps.shares.get(step.DATA_WAIT, 0.0)
        if share > warn:
            text = f"batch wait {pct(share)} of the step (target < {pct(DATA_WAIT_WARN)})"
            agree.append(Evidence(text, "agent"))
    else:
        missing.append("agent")
    shares = _stack_shares(sig)
    if shares is not None:
        w = shares.get(stack.DATA_WAIT, 0.0) + shares.get(stack.FETCH, 0.0)
        need = _band(STACK_SHARE, sig, *held)
        if w > need:
            agree.append(
                Evidence(
                    f"main thread waiting on or preparing data {pct(w)} of "
                    f"{sig.stacks.samples if sig.stacks else 0} stack samples (> {pct(need)})",
                    "stacks",
                )
            )
    else:
        missing.append("stacks")
    if sig.gpu is not None:
        g = sig.gpu
        if g.util < GPU_STARVED and agree:
            agree.append(Evidence(f"GPU busy only {g.util:.0f}% of the time", "NVML"))
        elif g.util >= GPU_BUSY:
            against.append(Evidence(f"GPU busy {g.util:.0f}% of the time", "NVML", False))
        elif sig.gpu_view and STARVED_FROM <= g.util < GPU_STARVED and g.util_cv >= BURSTY:
            # nothing but NVML speaks for the job: a GPU that works in bursts and waits between
            # them is starved, most often of batches (attached, the job's own signals say which)
            agree.append(
                Evidence(
                    f"GPU busy only {g.util:.0f}% of the time, in bursts (variation "
                    f"{g.util_cv:.2f} >= {BURSTY:g}): it waits between batches of work",
                    "NVML",
                )
            )
        else:
            against.append(Evidence(f"GPU busy {g.util:.0f}% of the time", "NVML", False))
    fired = bool(agree) and (share is None or share > warn)
    bound = "data-input"
    summary = "the GPU waits for the next batch"
    explains: tuple[str, ...] = ()
    h = sig.host
    if fired and h is not None and not h.exited:
        io = _io_evidence(h)
        kernel = _kernel_reads(h, sig)
        if kernel is not None:  # busy, but in opens and reads: reading, not transforming
            bound, summary = "data-input/io", "reading the data is the bottleneck"
            agree.extend(e for e in (io, kernel) if e is not None)
        elif _transforming(h, sig):
            # pegged, or busy most of the time on a machine whose cores are shared
            bound, summary = "data-input/cpu-transform", "DataLoader workers are CPU-bound"
            wants = ""
            if (h.workers_demand or 0) - (h.workers_busy or 0) >= 0.1:
                wants = f", wanting {pct(h.workers_demand or 0)} with the run-queue wait"
            agree.append(
                Evidence(
                    f"{h.workers_pegged} of {h.workers} workers at "
                    f">= {pct(WORKER_PEGGED)} of a core, "
                    f"{pct(h.workers_busy or 0)} of a core each on average{wants} "
                    f"(computing from {pct(WORKERS_COMPUTE)})",
                    "host",
                )
            )
            if not pools_crowd(sig):
                explains = ("cpu-oversubscribed",)
        elif io is not None:
            bound, summary = "data-input/io", "reading the data is the bottleneck"
            agree.append(io)
        elif (
            not h.workers
            and shares is not None
            and shares.get(stack.FETCH, 0) > _band(STACK_SHARE, sig, "data-input/cpu-transform")
            # computing (CPU used, or queued for a CPU), not asleep on a remote read
            and h.cpu_wanted >= _band(MAIN_COMPUTING, sig, "data-input/cpu-transform")
        ):
            bound, summary = (
                "data-input/cpu-transform",
                "the main thread prepares every batch itself",
            )
            if not pools_crowd(sig):
                explains = ("cpu-oversubscribed",)
    f = _finding(
        bound,
        agree if fired else [],
        against,
        missing,
        summary,
        impact=share if share is not None else 0.3,
    )
    return replace(f, explains=explains) if f.fired else f


H2D_RX_GBPS = 1.0
"""PCIe receive (GB/s) that, with the SMs mostly idle, means copies gate the GPU
(research/nvml-signals.md: >= 1 GB/s with SM < 30%)."""
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
    return _finding(
        "h2d-copy",
        agree,
        against,
        missing,
        "host-to-device copies on the critical path",
        impact=share or (0.3 if agree else 0.0),
    )


RUNNABLE_PER_CPU = 1.5
"""Threads ready to run per effective CPU from which they fight over the CPUs..."""
RUNQ_PER_CPU = 0.5
"""... together with this much run-queue wait (seconds per second) per effective CPU."""
CPU_THROTTLED = 0.2
"""Share of CFS periods throttled from which the cgroup's CPU quota holds the job back."""


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
    - anything else (workers that wait, a plain data-input): the CPU fight explains it."""
    h = sig.host
    if h is None or h.exited or not h.effective_cpus:
        return _finding("cpu-oversubscribed", [], [], ["host"], "too many threads for the CPUs")
    agree = []
    e = h.effective_cpus
    if (
        h.threads_running is not None
        and h.runq is not None
        and h.threads_running > _band(RUNNABLE_PER_CPU, sig, "cpu-oversubscribed") * e
        and h.runq / e > _band(RUNQ_PER_CPU, sig, "cpu-oversubscribed")
    ):
        agree.append(
            Evidence(
                f"{h.threads_running:.0f} thread{'' if round(h.threads_running) == 1 else 's'} "
                f"ready to run on {e:.1f} CPUs "
                f"({h.cpu_source}), run-queue wait {h.runq:.1f} s/s",
                "host",
            )
        )
    throttled = _band(CPU_THROTTLED, sig, "cpu-oversubscribed")
    if h.throttled_ratio is not None and h.throttled_ratio > throttled:
        share = pct(h.throttled_ratio)
        text = f"cgroup throttled in {share} of periods (> {pct(throttled)})"
        agree.append(Evidence(text, "host"))
    f = _finding(
        "cpu-oversubscribed",
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
    return replace(f, explains=DATA_BOUNDS[:2] if pools_crowd(sig) else DATA_BOUNDS[:1])


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
    agree, missing = [], []
    side = 0.0
    gc_spikes = False
    side_share = _band(SIDE_SHARE, sig, "side-work")
    if st is None or not st.shares:
        missing.append("agent")
    else:
        side = sum(st.shares.get(p, 0.0) for p in step.SIDE_PHASES)
        if side > side_share:
            text = f"checkpoint / logging {pct(side)} of step time (> {pct(side_share)})"
            agree.append(Evidence(text, "agent"))
        n, med = st.spike_steps or st.steps, st.spike_median_ms or st.median_ms
        total = med * n + sum(s.ms - med for s in st.spikes)
        spikes = tuple(s for s in st.spikes if s.grew.startswith("gc") or s.grew in SIDE_GROWTH)
        periodic = max(PERIODIC_MIN, n // PERIODIC_OF)
        if len(spikes) > periodic:
            # slow steps are the norm (a noisy machine): only measured GC pauses still stand out
            spikes = tuple(s for s in spikes if s.grew.startswith("gc"))
        excess = sum(s.ms - med for s in spikes)
        spike_time = _band(SPIKE_TIME, sig, "side-work")
        if spikes and len(spikes) <= periodic and total and excess / total > spike_time:
            phases = sorted({s.grew for s in spikes})
            gc_spikes = any(p.startswith("gc") for p in phases)
            if "gc" in phases and "gc (full collections)" in phases:
                phases.remove("gc")  # one GC entry: a young collection lengthened by load too
            agree.append(
                Evidence(
                    f"{len(spikes)} of {n} steps over {SPIKE:g}x the median "
                    f"({med:.0f} ms), {pct(excess / total)} of the time "
                    f"(> {pct(spike_time)}), growing in {', '.join(phases)}",
                    "agent",
                )
            )
            side = max(side, excess / total)
        if st.gc_share is not None and (gc_spikes or st.gc_share > side_share):
            over = f" (> {pct(side_share)})" if st.gc_share > side_share else ""
            agree.append(
                Evidence(
                    f"Python garbage collection {pct(st.gc_share)} of step time{over}, "
                    f"{st.gc_full} full collections in {n} steps",
                    "agent",
                )
            )
            side = max(side, st.gc_share)
    shares = _stack_shares(sig)
    if shares is None:
        missing.append("stacks")
    else:
        n = sig.stacks.samples if sig.stacks else 0
        saving = shares.get(stack.CHECKPOINT_SAVE, 0)
        evaluating = shares.get(stack.EVAL, 0) + shares.get(stack.EVAL_LOG, 0)
        # the agent has the step's numbers, unless the step in progress is itself the side
        # work: an eval pass of 10 s shows in no finished step until it ends
        timed = st is not None and bool(st.shares) and not _step_overdue(st)
        if timed:  # corroboration
            if saving > SAVE_SHARE:
                agree.append(
                    Evidence(
                        f"main thread in torch.save in {saving:.0%} of {n} stack samples "
                        f"(> {pct(SAVE_SHARE)})",
                        "stacks",
                    )
                )
        elif saving + evaluating > side_share:
            parts = [f"in torch.save {pct(saving)}"] if saving else []
            if evaluating:
                parts.append(f"in an eval pass or logging {pct(evaluating)}")
            agree.append(
                Evidence(
                    f"main thread {', '.join(parts)} of {n} stack samples "
                    f"(> {pct(side_share)} of the time)",
                    "stacks",
                )
            )
            side = max(side, saving + evaluating)
    summary = (
        "garbage collection pauses stall training"
        if gc_spikes
        else "periodic side work stalls training"
    )
    return _finding("side-work", agree, [], missing, summary, impact=side)


LAUNCH_UTIL = 80.0
"""GPU utilisation (%) from which a GPU that does little is being fed tiny kernels..."""
TINY_KERNELS = 0.5
"""... when its SMs are busy under this share of its utilisation..."""
LOW_POWER = 0.4
"""... or, without GPM, it draws under this share of its power limit."""
SYNC_SHARE = 0.1
"""Share of stack samples of the main threads in explicit syncs that counts."""


LOOP_SHARE = 0.3
"""Share of a typical step the loop spends in its own Python outside every training phase
(per-step metrics, logging, .item()/.tolist() syncs, bookkeeping) from which that is the
bottleneck: the GPU idles through it every step (domain.md's host-overhead: "GPU gaps while
the CPU is busy in Python; per-step .item() syncs"). Every step rather than a periodic spike,
which is side-work. The same share of the main threads' stack samples without the agent."""


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
    need = _band(LOOP_SHARE, sig, "host-overhead")
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
        need = _band(LOOP_SHARE, sig, "host-overhead")
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
    return _finding("host-overhead", agree, against, missing, summary, impact=impact)


DRAM_BUSY = 80.0
"""DRAM bandwidth (% of peak) from which memory is the limit (domain.md: > ~80%)..."""
TENSOR_LOW = 30.0
"""... while the tensor cores are busy under this (%)."""


def memory_bandwidth(sig: RuleInputs) -> Finding:
    g = sig.gpu
    if g is None:
        return _finding("memory-bandwidth", [], [], ["NVML"], "DRAM bandwidth is the limit")
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
    return _finding(
        "memory-bandwidth",
        agree,
        against,
        missing,
        "DRAM bandwidth is the limit",
        impact=0.2 if agree else 0.0,
    )


COMPUTE_CLOCK = 0.9
"""SM clock over its max from which a busy GPU computes at full speed."""
COMPUTE_SM = 80.0
"""SMs busy (%, GPM) from which the utilisation is real work, not a trickle of kernels."""
COMPUTE_SHARE = 0.8
"""Share of the step in forward, backward and optimizer from which the step is computing."""
STACK_COMPUTE = 0.7
"""Share of the main threads' stack samples in forward, backward or the optimizer from which,
without the agent, the loop computes: py-spy also lands in the loss, zero_grad and the loop's
own lines, which the agent counts inside its phases or not at all."""
HELD_BUSY = 80.0
"""GPU utilisation (%) a held gpu-compute verdict needs: domain.md's "well used" (> 80%)."""


def gpu_compute(sig: RuleInputs) -> Finding:
    """The good case: the GPU busy (> GPU_BUSY % at COMPUTE_CLOCK of its max clock, no
    throttling) and the step in the model's own work. Utilisation is read over the window or
    its last RECENT_S, whichever is higher: a job that began computing a few seconds ago is
    compute-bound now. Without the agent, the main threads' stacks in forward / backward /
    optimizer (>= STACK_COMPUTE of the samples) while the process works on the CPU (>=
    MAIN_COMPUTING cores) say the loop computes: that outweighs a GPU reading still quiet from
    the start (it is shown against), never a GPU the rules call starved by data. Not before the
    agent's first steps and STACK_MIN dumps: until then no bottleneck could have shown."""
    g = sig.gpu
    agree, against, missing = [], [], []
    held = sig.holding == "gpu-compute"
    numbers = None  # what NVML read, shown against when the rule does not fire (why screen)
    if g is None:
        missing.append("NVML")
    else:
        # the window, or its last RECENT_S when the GPU got busier there (a job that started)
        lately = g.util_recent is not None and g.util_recent > g.util
        util = g.util_recent if lately and g.util_recent is not None else g.util
        sm = g.sm_recent if lately and g.sm_recent is not None else g.sm_active
        busy = HELD_BUSY if held else GPU_BUSY
        if (
            util >= busy
            and (g.clock_ratio or 0) >= COMPUTE_CLOCK
            and g.power_throttled < POWER_SHARE
            and g.thermal_throttled < THERMAL_SHARE
        ) and (sm is None or sm >= _band(COMPUTE_SM, sig, "gpu-compute")):
            when = f" over the last {RECENT_S:g} s" if lately else ""
            agree.append(
                Evidence(
                    f"GPU busy {util:.0f}%{when} (>= {busy:.0f}%), SM clock "
                    f"{pct(g.clock_ratio or 0)} of max"
                    + (f", SMs busy {sm:.0f}%" if sm is not None else ""),
                    "NVML",
                )
            )
        else:
            numbers = Evidence(
                f"GPU busy {util:.0f}% (needs {busy:.0f}%), SM clock {pct(g.clock_ratio or 0)} "
                f"of max (needs {pct(COMPUTE_CLOCK)}), no throttling"
                + (f", SMs busy {sm:.0f}%" if sm is not None else ""),
                "NVML",
                False,
            )
    if sig.steps and sig.steps.shares:
        compute = sum(sig.steps.shares.get(p, 0) for p in step.MODEL_PHASES)
        need = _band(COMPUTE_SHARE, sig, "gpu-compute")
        if compute >= need:
            agree.append(
                Evidence(
                    f"forward + backward + optimizer {pct(compute)} of the step (>= {pct(need)})",
                    "agent",
                )
            )
        else:
            against.append(
                Evidence(
                    f"forward + backward + optimizer only {pct(compute)} of the step "
                    f"(< {pct(need)})",
                    "agent",
                    False,
                )
            )
    elif (shares := _stack_shares(sig)) is not None and sig.host is not None:
        h = sig.host
        compute = sum(shares.get(p, 0) for p in stack.MODEL_PHASES)
        need = _band(STACK_COMPUTE, sig, "gpu-compute")
        working = h.cpu_wanted
        if compute >= need and working >= MAIN_COMPUTING and not h.exited:
            n = sig.stacks.samples if sig.stacks else 0
            agree.append(
                Evidence(
                    f"main threads in forward / backward / optimizer {pct(compute)} of {n} "
                    f"stack samples (>= {pct(need)})",
                    "stacks",
                )
            )
            agree.append(
                Evidence(f"the job uses {working:.1f} cores of CPU (>= {MAIN_COMPUTING:g})", "host")
            )
            if g is not None and not any(e.source == "NVML" for e in agree):
                against.append(
                    Evidence(
                        f"GPU busy only {g.util:.0f}% over the window (from a quiet start?)",
                        "NVML",
                        False,
                    )
                )
    from_nvml = any(e.source == "NVML" for e in agree)
    from_stacks = any(e.source == "stacks" for e in agree)
    # the good case is the absence of a bottleneck: it can be told only once the sources that
    # would show one have had their say (the agent's first steps, STACK_MIN dumps); before the
    # agent's third step of a slow loop (5-s steps), the stacks have seen where the steps go
    settled = (sig.steps is None or bool(sig.steps.shares) or from_stacks) and (
        sig.stacks is None or sig.stacks.samples >= STACK_MIN
    )
    fired = settled and ((from_nvml and not against) or from_stacks)
    if not fired and numbers is not None and not any(e.source == "NVML" for e in against):
        against.append(numbers)
    return _finding(
        "gpu-compute",
        agree if fired else [],
        against,
        missing,
        "the GPU computes all the time (the good case)",
    )


IDLE_UTIL = 5.0
"""Mean GPU utilisation (%) under which, with no steps, nothing is training."""
IDLE_CPU = QUIET_CPU
"""CPU (cores) of the whole process tree, CPU plus run-queue wait, under which it does nothing
(the hang rule's figure for one process: a tree of blocked processes stays under it too)."""
IDLE_STACKS = 0.8
"""Share of the main threads' stack samples asleep outside any wait (py-spy: idle) from which
the stacks say nothing runs."""


IDLE_SPAN_S = 3.0
"""Seconds of GPU readings before a quiet GPU says anything: at attach the first GPU readings
come before the host's and the stacks' (which would say the job works), so an idle GPU alone
would call a busy job idle for a moment."""


def _quiet(sig: RuleInputs) -> tuple[list[Evidence], list[Evidence]]:
    """(what says the job does nothing, what says it does something), from every source."""
    quiet, busy = [], []
    g = sig.gpu
    if g is not None:
        if g.util >= IDLE_UTIL or (g.util_recent or 0) >= IDLE_UTIL:
            busy.append(Evidence(f"GPU busy {g.util:.0f}%", "NVML", False))
        elif g.span_s >= IDLE_SPAN_S:  # the first readings, before another source has spoken
            quiet.append(Evidence(f"GPU busy {g.util:.0f}% (< {IDLE_UTIL:g}%)", "NVML"))
    st = sig.steps
    if st is not None:
        if st.steps == 0 and not st.shares:
            quiet.append(Evidence("no training steps seen", "agent"))
        else:
            busy.append(Evidence(f"{st.steps} training steps seen", "agent", False))
    h = sig.host
    if h is not None and not h.exited:
        working = h.cpu_wanted
        if h.cpu_cores is None:
            pass
        elif working < IDLE_CPU:
            quiet.append(Evidence(f"the job uses {working:.2f} cores (< {IDLE_CPU:g})", "host"))
        else:
            busy.append(Evidence(f"the job uses {working:.1f} cores of CPU", "host", False))
    k = sig.stacks
    if k is not None and k.samples:
        asleep = k.main_shares.get(stack.IDLE, 0.0)
        if asleep >= IDLE_STACKS:
            quiet.append(
                Evidence(f"main threads asleep in {pct(asleep)} of stack samples", "stacks")
            )
        else:
            top = max(
                ((p, v) for p, v in k.main_shares.items() if p != stack.IDLE),
                key=lambda pv: pv[1],
                default=None,
            )
            if top is not None:
                text = f"main threads in {top[0]} in {pct(top[1])} of stack samples"
                busy.append(Evidence(text, "stacks", False))
    return quiet, busy


def idle(sig: RuleInputs) -> Finding:
    """Nothing is training: the target exited, or every source says the job does nothing (the
    GPU quiet, no steps, no CPU in the tree, main threads asleep). One source that sees work
    (CPU, a step, a stack in backward, a DataLoader fetch, a parked lock) is enough for it not
    to be idle: a job that is starting is warming up (``warming_up``), one stuck is for hung."""
    if sig.host is not None and sig.host.exited:
        exited = Evidence("the target process has exited", "host")
        return _finding("idle", [exited], [], [], "the job has exited: nothing is training")
    inside = sig.steps is not None or (sig.stacks is not None and sig.stacks.samples > 0)
    if sig.host is not None and not inside:
        # a live process that uses no CPU is asleep or stuck: only its steps or its stacks
        # tell idle from hung (py-spy denied or missing, no agent): never concluded without
        return _finding("idle", [], [], ["agent", "stacks"], "nothing is training")
    quiet, busy = _quiet(sig)
    # every source that is there must have said so: a first host reading has no CPU rate yet
    present = {
        name
        for name, there in (
            ("NVML", sig.gpu),
            ("host", sig.host),
            ("agent", sig.steps),
            ("stacks", sig.stacks and sig.stacks.samples),
        )
        if there
    }
    if busy or not quiet or present - {e.source for e in quiet}:
        return _finding("idle", [], busy, [], "nothing is training")
    return _finding("idle", quiet, [], [], "nothing is training")


STILL = (stack.IDLE, stack.LOCK_WAIT, stack.BLOCKED)
"""Stack phases of a main thread that is not starting anything: asleep, or parked on a lock or
a queue (that one is for the hang rule)."""
WARMUP_STACKS = 0.5
"""Share of the main threads' dumps in setup or training frames (anything but STILL) from which
the stacks say the job is starting."""
WARMUP_STEPS = STEPS_SEEN
"""Steps the agent must have seen (usable ones: not the first) before the job is past its start."""


def warming_up(sig: RuleInputs) -> str | None:
    """Why the job is still starting, or None: with an agent, fewer than WARMUP_STEPS steps;
    without one, the process is alive and works (CPU, or stacks anywhere but asleep) while the
    GPU is still quiet (< GPU_STARVED %). The verdict shows it as its note when no bound fires:
    a job loading its data or its model is neither idle nor any bound yet."""
    h = sig.host
    if h is not None and h.exited:
        return None
    st = sig.steps
    if st is not None:
        if st.steps < WARMUP_STEPS:
            return f"{WARMING_UP}: {st.steps} of {WARMUP_STEPS} steps seen"
        return None
    g = sig.gpu
    if g is not None and max(g.util, g.util_recent or 0) >= GPU_STARVED:
        return None
    doing = []
    if h is not None and h.cpu_cores is not None:
        working = h.cpu_wanted
        if working >= IDLE_CPU:
            doing.append(f"the job uses {working:.1f} cores of CPU")
    k = sig.stacks
    if k is not None and k.samples:
        # setup or training frames; a thread parked on a lock or a queue is no start
        moving = sum(v for p, v in k.main_shares.items() if p not in STILL)
        if moving >= WARMUP_STACKS:
            doing.append(f"main threads at work in {pct(moving)} of {k.samples} stack samples")
    if not doing:
        return None
    gpu = f"GPU still quiet ({g.util:.0f}%), " if g is not None else ""
    return f"{WARMING_UP}: {gpu}{'; '.join(doing)}"
