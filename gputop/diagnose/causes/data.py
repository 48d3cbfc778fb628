"""Why the step waits for its batches, for this job: who makes them (the training thread
itself, with no workers; or the workers, busy or waiting) and what that work is made of,
from the stacks of the threads that do it, grouped by kind (text, images, reads, ...). The
levers follow the kind the frames show (docs/facts/bounds.md, "What consumes a slice").
Pure."""

from __future__ import annotations

from dataclasses import dataclass

from gputop.diagnose.bound_levers import more_workers, saturated, target_workers
from gputop.diagnose.causes.kinds import consumed, kind_levers, levers_for, work_evidence
from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.lever import Lever, sized
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.thresholds import WORKERS_WAIT
from gputop.model.budget import Budget, standard_error
from gputop.model.frame_kinds import KIND_NAMES
from gputop.model.setup import loader_workers
from gputop.model.slice_work import WORKERS, SliceWork
from gputop.vocab import budget as slices
from gputop.vocab.stacks import FETCH

SLICE = slices.DATA

COMPUTES = 0.5
"""Share of its batch waits the training thread computes through (the agent's clock) from
which, with no workers, it makes its batches itself rather than waits on reads."""


def _workers(sig: RuleInputs) -> int | None:
    """The training loader's workers: the agent's setting, else the processes the host saw."""
    n = loader_workers(sig.steps.fingerprint if sig.steps is not None else None)
    if n is not None:
        return n
    return sig.host.workers if sig.host is not None else None


def _work(sig: RuleInputs, key: str) -> SliceWork | None:
    return sig.stacks.work.get(key) if sig.stacks is not None else None


def find(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """Who makes the batches and what that work is; None when neither the loader's workers
    nor the training thread's share of its wait were measured."""
    workers = _workers(sig)
    wait = ""
    timing = None
    if budget is not None and budget.typical.steps:
        r = budget.typical
        step = r.seconds / r.steps * 1000
        timing = Timing(budget.share(SLICE) * step, step, r.pid)
        wait = f" ({timing.wait_ms:.0f} ms a step)"
    if workers == 0:
        return _own_thread(sig, wait, timing)
    if workers:
        return _from_workers(sig, workers, wait, timing)
    return None


@dataclass(frozen=True)
class Timing:
    """The typical rank's data wait and step (ms): what the levers are sized against."""

    wait_ms: float
    step_ms: float
    pid: int = 0
    """The typical rank's process (its wait for a CPU is what cheaper batches may give back)."""


def cpu_relief_ms(sig: RuleInputs, timing: Timing, k: float) -> float:
    """The training process's wait for a CPU (ms a step) that goes when the workers' CPU drops
    by the share ``k``. Outside its data wait the training thread computes; on CPUs the job
    over-asks (CPU wanted above the effective CPUs) part of that time it waits for a CPU
    instead, runq / (its CPU + runq) of it. The workers' demand cut by ``k`` frees ``k`` x
    their demand, and that wait goes in the proportion the freed CPU covers of the excess.
    0 where the CPUs are not over-asked or a reading is missing."""
    h = sig.host
    if h is None or not h.effective_cpus or h.workers_demand is None or k <= 0:
        return 0.0
    over = h.cpu_wanted - h.effective_cpus
    trainer = next((p for p in h.process_cpu if p.pid == timing.pid), None)
    if over <= 0 or trainer is None or not trainer.runq or trainer.cores is None:
        return 0.0
    waiting = trainer.runq / (trainer.cores + trainer.runq)
    freed = k * h.workers_demand * h.workers
    return min(1.0, freed / over) * waiting * max(0.0, timing.step_ms - timing.wait_ms)


def _kind_sized(sig: RuleInputs, levers: tuple[Lever, ...], work: SliceWork,
                timing: Timing | None, workers: bool) -> tuple[Lever, ...]:  # fmt: skip
    """Each kind's levers sized by the share of the work in that kind (``k``, with its
    sampling error): the work a batch takes shrinks by ``k``. The training thread that makes
    its batches saves that share of its wait; workers that cannot keep up deliver a batch
    every step * (1 - k), so the step saves min(wait, step * k), and on CPUs the job
    over-asks, the CPU they no longer take shortens the training thread's own wait for one
    (``cpu_relief_ms``): more than the data wait itself."""
    if timing is None or timing.wait_ms <= 0:
        return levers
    out = []
    for lever in levers:
        kind = next((k for k, _ in work.kinds if lever in kind_levers(k, SLICE)), None)
        if kind is None:
            out.append(lever)
            continue
        k = work.share(kind)
        err = standard_error(k, work.samples)
        t = timing

        def part(x: float, t: Timing = t) -> float:
            x = max(0.0, min(1.0, x))
            if not workers:
                return x
            return min(1.0, t.step_ms * x / t.wait_ms) + cpu_relief_ms(sig, t, x) / t.wait_ms

        said = f"if the {KIND_NAMES[kind]} ({k:.0%} of the samples) went"
        relief = cpu_relief_ms(sig, timing, k) if workers else 0.0
        if relief >= 0.5:
            said += (f", and with the workers' CPU the training thread's wait for a CPU "
                     f"({relief:.0f} ms a step)")  # fmt: skip
        out.append(sized(lever, SLICE, part(k), (part(k - err), part(k + err)), said,
                         most=part(1.0)))  # fmt: skip
    return tuple(out)


def _workers_sized(lever: str, sig: RuleInputs, timing: Timing | None) -> str:
    """Workers for a training thread that makes its batches itself, sized: the target
    workers each make a batch in the time the thread takes now (its whole wait); the step
    becomes the longer of the rest of it and a batch's time over the workers. The least: as
    many workers as the CPUs the job leaves free (the thread's batch work among them)."""
    target = target_workers(sig)
    if timing is None or not target or timing.wait_ms <= 0:
        return lever
    s, d = timing.step_ms, timing.wait_ms

    def saved(workers: float) -> float:  # share of the wait
        return max(0.0, s - max(s - d, d / max(workers, 1e-3))) / d

    h = sig.host
    free = None
    if h is not None and h.effective_cpus and h.cpu_cores is not None:
        free = h.effective_cpus - h.cpu_wanted + d / s
    least = saved(min(target, free)) if free is not None else saved(target)
    said = (f"if {target} worker{'s each' if target > 1 else ''} made a batch in the time the "
            "training thread takes now")  # fmt: skip
    return sized(lever, SLICE, saved(target), (least, saved(target)), said)


def _own_thread(sig: RuleInputs, wait: str, timing: Timing | None) -> Cause | None:
    """No workers: the training thread makes each batch in its wait, computing or reading."""
    cpu = sig.steps.data_cpu if sig.steps is not None else None
    work = _work(sig, FETCH)
    if cpu is None and work is None:
        return None
    evidence: list[Evidence] = []
    doing = ""
    if cpu is not None:
        evidence.append(
            Evidence(f"the training thread computes through {cpu:.0%} of its batch waits "
                     "(its CPU clock in them)", "agent")
        )  # fmt: skip
        doing = (
            f", computing through {cpu:.0%} of it"
            if cpu >= COMPUTES
            else f", asleep through {1 - cpu:.0%} of it (reading, not computing)"
        )
    text = f"the training thread makes each batch itself (num_workers=0){wait}{doing}"
    if work is not None:
        text += f": {consumed(work)}"
        evidence += work_evidence("the training thread's fetch", work)
    # workers first (the free knob, sized against the CPUs as the bound sizes it), unless the
    # CPUs are saturated: then the bound's own first lever says so
    first = (
        []
        if saturated(sig) is not None
        else [_workers_sized(more_workers(sig, {"num_workers": 0}), sig, timing)]
    )
    kinds = _kind_sized(sig, levers_for(work, SLICE), work, timing, False) if work else ()
    return Cause(text, tuple(evidence), (*first, *kinds))


def _from_workers(sig: RuleInputs, workers: int, wait: str, timing: Timing | None) -> Cause | None:
    """Workers that compute (their CPU) and what they compute, or workers that wait."""
    h = sig.host
    busy = (
        None if h is None else h.workers_demand if h.workers_demand is not None else h.workers_busy
    )
    work = _work(sig, WORKERS)
    if busy is None and work is None:
        return None
    evidence: list[Evidence] = []
    state = ""
    if busy is not None:
        evidence.append(Evidence(f"each DataLoader worker wants {busy:.0%} of a core (CPU "
                                 "plus its wait for one)", "host"))  # fmt: skip
        state = (
            f", each busy {busy:.0%} of a core" if busy >= WORKERS_WAIT
            else f", each using {busy:.0%} of a core: they wait rather than compute"
        )  # fmt: skip
    text = f"{workers} DataLoader worker{'s' if workers > 1 else ''} cannot keep up{wait}{state}"
    if work is not None:
        text += f": {consumed(work)}"
        evidence += work_evidence("the workers' fetch", work)
    kinds = _kind_sized(sig, levers_for(work, SLICE), work, timing, True) if work else ()
    return Cause(text, tuple(evidence), kinds)
