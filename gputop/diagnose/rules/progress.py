"""Is the job moving: hung (no progress for longer than its own cadence, every process
parked and quiet), stalled short of that, idle (nothing runs, or it exited), warming up.
The slice they speak for is no progress; a hang overrides every other bound."""

from __future__ import annotations

from collections.abc import Sequence

from gputop.diagnose.findings import WARMING_UP, Evidence, Finding
from gputop.diagnose.rules.common import GPU_STARVED, at, finding, frame_name, pct
from gputop.diagnose.signals.host import CPU_SPAN_S, HostSignals, ProcessCpu
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.signals.stacks import StackSignals
from gputop.diagnose.signals.steps import StepSignals
from gputop.diagnose.thresholds import (
    HANG_FLOOR_S,
    HANG_K,
    IDLE_DUMPS,
    IDLE_UTIL,
    STALL_NOTE_S,
    step_limit_s,
)
from gputop.model.roles import RANK
from gputop.model.stack_stats import Stillness
from gputop.model.stacks import Frame
from gputop.vocab import stacks as stack
from gputop.vocab.bounds import HUNG, IDLE

STEPS_SEEN = 3
"""Steps the agent must have seen before the job has a cadence (a first batch may take long)."""
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
SPINS = stack.HOST_SYNC
"""A thread in an explicit CUDA sync may spin on a core while it waits (CUDA's default
scheduling spins when there are more cores than contexts), and a hung NCCL kernel keeps the GPU
at 100%: its CPU time and the GPU's are no sign of work, only the cadence tells a long kernel
from a hang."""


def _where(phase: str, leaf: Frame | None, caller: Frame | None, ranks: int) -> str:
    """'blocked in Queue.get at train.py:41': the frame it waits in and the code that called."""
    if phase == stack.BACKWARD and ranks > 1:
        return f"in backward (where DDP's gradient all-reduce waits) at {at(caller)}"
    if leaf is None:
        return f"in {phase}"
    verb = "waits" if phase in (stack.COLLECTIVE_WAIT, stack.DATA_WAIT) else "blocked"
    if caller == leaf:  # its own line waits (`with lock:`, a C call): the line says what
        return f"{verb} at {at(leaf)} in {frame_name(leaf)}"
    return f"{verb} in {frame_name(leaf)} at {at(caller or leaf)}"


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
        who = ", ".join(m.label for m in inside)
        o = outside[0]
        verb = "wait" if len(inside) > 1 else "waits"
        where = _where(o.phase, o.leaf, o.caller, ranks)
        return f"{o.label} is not in the {coll} that {who} {verb} in: it is {where}"
    m = outside[0] if outside else inside[0]
    if inside and ranks > 1 and not outside:
        return f"every rank waits in a collective ({_where(m.phase, m.leaf, m.caller, ranks)})"
    return f"{m.label} {_where(m.phase, m.leaf, m.caller, ranks)}"


def _trainers(sk: StackSignals | None) -> tuple[list[Stillness], int]:
    """(the main or rank threads whose stillness decides a hang, how many ranks): the ranks
    when there are some, not a launcher (torchrun, spawn's parent) that only waits for them."""
    still = list(sk.still) if sk is not None else []
    trains = [m for m in still if m.role == RANK or m.rank is not None or _in_collective(m, 1)]
    return trains or still, len(trains)


def stuck(sk: StackSignals | None) -> Stillness | None:
    """The thread a hang is about: the still main or rank thread outside the collective the
    others wait in (they wait for it), else the first still one; None without stacks."""
    evidence, ranks = _trainers(sk)
    outside = [m for m in evidence if not _in_collective(m, ranks)]
    chosen = outside or evidence
    return chosen[0] if chosen else None


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
    return step_limit_s(st.p99_ms)


def _still_limit(m: Stillness, st: StepSignals | None) -> float:
    """Without the agent's cadence, how long this thread must stand on one stack."""
    if st is not None and m.phase in FIRST_STEP_WAITS:
        return HANG_FIRST_S  # no step yet: ranks meeting, a first batch coming
    return max(HANG_FLOOR_S, HANG_K * (m.before_s or 0))


def _reads(m: Stillness) -> str:
    """'12 reads by py-spy, the last 1 s ago': how many reads show it and how fresh they are."""
    age = f", the last {m.age_s:.0f} s ago" if m.age_s is not None else ""
    return f"{m.dumps} read{'s' if m.dumps != 1 else ''} by {m.via}{age}"


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
    no = finding(HUNG, [], [], missing, "no progress: the job is stuck")
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
        return finding(HUNG, agree, [], missing, "no progress: the job is stuck", impact=1.0)
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
                f"{m.label} {_where(m.phase, m.leaf, m.caller, ranks)}: same stack for "
                f"{m.still_s:.0f} s ({_reads(m)}){use}",
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
    return finding(HUNG, agree, [], missing, summary, impact=1.0)


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
        return finding(IDLE, [exited], [], [], "the job has exited: nothing is training")
    inside = sig.steps is not None or (sig.stacks is not None and sig.stacks.samples > 0)
    if sig.host is not None and not inside:
        # a live process that uses no CPU is asleep or stuck: only its steps or its stacks
        # tell idle from hung (py-spy denied or missing, no agent): never concluded without
        return finding(IDLE, [], [], ["agent", "stacks"], "nothing is training")
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
        return finding(IDLE, [], busy, [], "nothing is training")
    return finding(IDLE, quiet, [], [], "nothing is training")


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
