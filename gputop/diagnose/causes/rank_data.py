"""When the slow rank's extra time is in its data wait: below the slice, who makes its
batches against who makes the others' (its training thread with no workers, or its workers)
and how much of its wait its training thread computes through, each rank's own numbers side
by side. A per-rank config that left one rank with ``num_workers=0`` is the classic case:
that rank prepares each batch itself and every other rank waits for it in the next
collective. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gputop.diagnose.bound_levers import cpu_room
from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.lever import Lever
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.signals.rank_steps import RankSteps
from gputop.model.roles import WORKER
from gputop.model.setup import loader_workers
from gputop.model.step_stats import data_cpu_share

MORE_WORKERS = "more DataLoader workers on that rank, or cheaper batches there"


def _rank(sig: RuleInputs, pid: int) -> RankSteps | None:
    return sig.steps.of(pid) if sig.steps is not None else None


def _workers(r: RankSteps | None) -> int | None:
    return loader_workers(r.agent.fingerprint) if r is not None else None


def _cpu(r: RankSteps | None) -> float | None:
    return data_cpu_share(r.recent) if r is not None else None


def workers_cores(sig: RuleInputs, pid: int) -> float | None:
    """The mean CPU (cores) of each DataLoader worker of process ``pid``; None: none read."""
    procs = sig.host.process_cpu if sig.host is not None else ()
    got = [p.cores for p in procs if p.role == WORKER and p.ppid == pid and p.cores is not None]
    return statistics.fmean(got) if got else None


def data_cause(
    sig: RuleInputs, name: str, mine: int, others: Sequence[int], extra_ms: float,
    mine_ms: float, typical_ms: float, step_ms: float,
) -> Cause:  # fmt: skip
    """The slow rank (pid ``mine``) waits ``extra_ms`` a step longer for its batches than the
    median other rank (pids ``others``), of a ``step_ms`` step."""
    a = _rank(sig, mine)
    own_w = _workers(a)
    their_w = [w for p in others if (w := _workers(_rank(sig, p))) is not None]
    typical_w = int(statistics.median(their_w)) if their_w else None
    cpu = _cpu(a)
    their_cpu = [c for p in others if (c := _cpu(_rank(sig, p))) is not None]
    longer = f"{extra_ms:.0f} ms a step more ({mine_ms:.0f} vs {typical_ms:.0f} ms)"
    computing = f", computing through {cpu:.0%} of it" if cpu is not None else ""
    evidence = [Evidence(f"{name}: data wait {mine_ms:.0f} ms a step, the median other rank "
                         f"{typical_ms:.0f} ms", "agent")]  # fmt: skip
    if own_w is not None:
        said = f"the others {typical_w}" if typical_w is not None else "the others not known"
        evidence.append(Evidence(f"{name}: DataLoader num_workers={own_w}; {said}", "agent"))
    if cpu is not None:
        others_cpu = f" (the others {statistics.median(their_cpu):.0%})" if their_cpu else ""
        evidence.append(Evidence(f"{name}'s training thread computes through {cpu:.0%} of its "
                                 f"batch waits{others_cpu}", "agent"))  # fmt: skip
    if own_w == 0 and typical_w:
        give = (f"give {name}'s DataLoader workers as the others have (num_workers={typical_w}): "
                "check the per-rank config that left it none")  # fmt: skip
        return Cause(
            f"{name} prepares its batches on its training thread (num_workers=0; the other "
            f"ranks have {typical_w}): it waits for them {longer}{computing}",
            tuple(evidence) + _room_evidence(sig),
            _on_free_cpus(sig, give, name, extra_ms, step_ms),
        )  # fmt: skip
    if own_w == 0:
        return Cause(
            f"{name} prepares its batches on its training thread, as the others do, and its "
            f"take longer: it waits {longer}{computing}",
            tuple(evidence),
            (f"DataLoader workers on every rank (now num_workers=0), or cheaper batches on "
             f"{name}: look at what its data differs in",),
        )  # fmt: skip
    cores = workers_cores(sig, mine)
    theirs = [c for p in others if (c := workers_cores(sig, p)) is not None]
    busy = ""
    if cores is not None and theirs:
        typical_c = statistics.median(theirs)
        busy = f"; each uses {cores:.0%} of a core (the others' {typical_c:.0%})"
        evidence.append(Evidence(f"{name}'s DataLoader workers each use {cores:.0%} of a core, "
                                 f"the other ranks' {typical_c:.0%}", "host"))  # fmt: skip
    workers = f"its {own_w} DataLoader workers" if own_w else "its DataLoader"
    return Cause(
        f"{name}: {workers} keep it waiting for batches {longer}{busy}",
        tuple(evidence),
        (MORE_WORKERS,),
    )


def _room_evidence(sig: RuleInputs) -> tuple[Evidence, ...]:
    room = cpu_room(sig)
    if room is None or sig.host is None:
        return ()
    free, cpus = room
    return (Evidence(f"the job wants {sig.host.cpu_wanted:.1f} of the {cpus:g} CPUs it may use "
                     f"({free:.1f} free)", "host"),)  # fmt: skip


def _on_free_cpus(
    sig: RuleInputs, give: str, name: str, extra_ms: float, step_ms: float
) -> tuple[str, ...]:
    """A worker takes the batches off the training thread only as far as a CPU is free for it:
    the job's CPU work a step stays what it is, so its step cannot be shorter than that work
    over the CPUs, which caps what the worker saves at ``step_ms`` x free / CPUs. Sized as
    the share of the rank's extra it keeps (``Lever.removes``); with less than all of it, the
    batches made cheaper come next, which saves whether a CPU is free or not."""
    room = cpu_room(sig)
    if room is None or extra_ms <= 0:
        return (give,)
    free, cpus = room
    keeps = min(1.0, step_ms * free / cpus / extra_ms)
    if keeps >= 1.0:
        return (give,)
    shared = (f"{free:.1f} of the {cpus:g} CPUs free: a worker shares the CPUs the job's threads "
              "already want")  # fmt: skip
    return (
        Lever(give, removes=keeps, condition=shared),
        f"make {name}'s batches cheaper to prepare (the work its worker would do), or free "
        "CPUs for its worker",
    )
