"""The step-time budget, computed: for each rank, the window's wall time split into the slices
of ``model/budget.py`` (model compute, data wait, H2D, exposed comms wait, straggler wait,
evaluation, checkpointing, logging, GC, the loop's own Python, no progress). Pure.

Each slice comes from the best source present: the agent's phases (its clock, every step),
then the main thread's stack samples (one a second), then NVML for what the host cannot see
(a GPU busy through a ``.item()`` the loop waits in is computing, not looping). Clocks first:
the agent's unmarked time is the loop's own, split only by samples taken from outside the
process (py-spy, whatever its GIL does) where they say what it was (a logger the agent's
entry points do not know), with their sampling error; the agent's own samples, which wait
for the GIL, name what runs and never size it. Every source that measured a slice is kept
beside it; those within ``AGREE`` of the chosen size are its agreement, which is the
verdict's confidence, never its rank (TensorFlow Profiler's step-time breakdown, HTA's
temporal breakdown, Lightning's SimpleProfiler: the biggest share first).

The job's budget is its typical rank's (``model/ranks.typical``: the lower median by work), so
the rank shown waits as long as most ranks do (with one straggler among eight, a rank that
waits for it; of two, the one that waits). Every rank's own budget is kept for the ranks pane,
diagnose and /metrics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.signals.rank_steps import RankSteps
from gputop.diagnose.signals.steps import SPIKE
from gputop.diagnose.step_sums import phase_slice, sums_of, sums_over, take_gc
from gputop.model.budget import AGREE, Budget, RankBudget, Slice, standard_error
from gputop.model.ranks import typical
from gputop.model.stack_stats import TORCH_OP, MainPhases
from gputop.model.steps import AgentState, StepRecord
from gputop.vocab import budget as b
from gputop.vocab import stacks as stack

STEPS_MIN = 3
"""Steps an agent must have finished before its clock makes a budget."""
STACKS_MIN = 5
"""Stack samples (one a second) a process needs since it began to train before the stacks
make a budget: one dump of five is 20%."""
OVERDUE_MAX_S = 7 * 86400.0
"""The longest step in progress a reading is taken to mean (a week); past it, damage."""
OVERDUE_S = 1.0
"""A step in progress for longer than this, and SPIKE x the median step, counts in the window:
a 10-s eval pass shows in no finished step until it ends."""

STACK_SLICE: dict[str, str] = {
    stack.FORWARD: b.COMPUTE,
    stack.BACKWARD: b.COMPUTE,
    stack.OPTIMIZER: b.COMPUTE,
    stack.HOST_SYNC: b.COMPUTE,  # waiting for the GPU to finish its work
    TORCH_OP: b.COMPUTE,
    stack.DATA_WAIT: b.DATA,
    stack.FETCH: b.DATA,  # the main thread making its own batch
    stack.COLLECTIVE_WAIT: b.COMMS,
    stack.CHECKPOINT_SAVE: b.CHECKPOINT,
    stack.EVAL: b.EVAL,
    stack.LOGGING: b.LOG,
    stack.EVAL_LOG: b.LOG,
}
"""Stack phases -> slices; the rest (the job's own code, its locks and queues, sleeping) is the
loop's own time."""
SPLIT_SAMPLES = 20
"""Samples from outside an agent's process needs before they split its unmarked time: the
clock is exact, and five samples of a loop that is 35% Python miss it one time in nine (seen:
18 points of a loop moved to compute on five)."""
SPLIT_Z = 2.0
"""Standard errors by which the samples must show more of a slice than the clock gave it
before any moves: side work then moves whole (what they show), compute only beyond them."""
SPLITS_UNMARKED = (b.EVAL, b.CHECKPOINT, b.LOG)
"""Slices the stacks may find inside the agent's unmarked time (an eval pass's metrics between
its forwards, a logging call, a save the hooks did not see)."""


def _zero() -> dict[str, float]:
    return dict.fromkeys(b.SLICES, 0.0)


def _normalised(acc: dict[str, float]) -> dict[str, float]:
    """Shares that add up to 1, each held to [0, 1] (rounding in the sums)."""
    total = sum(acc.values())
    if not total > 0:
        return acc
    return {k: min(1.0, max(0.0, v / total)) for k, v in acc.items()}


def _in_progress(a: AgentState, median_s: float) -> float:
    """Seconds of the step in progress that count (0 unless overdue)."""
    since = a.since_step_s
    if since is None or a.state == "exited" or not 0 <= since <= OVERDUE_MAX_S:
        return 0.0  # no clock, or one no running step gives (a damaged reading)
    return since if since > max(OVERDUE_S, SPIKE * median_s) else 0.0


def _stack_shares(counts: Sequence[tuple[str, int]]) -> dict[str, float]:
    acc = _zero()
    for phase, n in counts:
        acc[STACK_SLICE.get(phase, b.LOOP)] += n
    return _normalised(acc)


def agent_budget(
    rank: RankSteps, stacks: MainPhases | None, stalled: bool, stack_now: str | None = None
) -> RankBudget | None:
    """One agent's budget over its long window (``RankSteps.long``): every slice the agent's
    clocks time, and its unmarked time as the loop's own; split by stack samples only where
    samples taken from outside (py-spy, whatever the job's GIL does) say what it was, with
    their sampling error. The agent's own samples name what runs, beside the clock (they
    wait for the GIL: their shares are biased). None before STEPS_MIN steps."""
    a = rank.agent
    sums = sums_of(rank, STEPS_MIN)
    if sums is None:
        return None
    acc = dict(sums.ns)
    extra = _in_progress(a, sums.median_s)
    where = (
        b.STALL
        if stalled
        else phase_slice(a.open_phase)
        if a.open_phase
        else STACK_SLICE.get(stack_now or "")
    )
    if extra and where is not None:  # a wait nobody names (no phase open, the stack in the
        acc[where] += extra * 1e9  # job's own code) is left out rather than guessed
    take_gc(acc, sums.gc)
    total = sum(acc.values())
    if not 0 < total < math.inf:
        return None  # nothing timed, or numbers no clock gives
    raw = _normalised(acc)
    shares, samples = raw, 0
    errors: dict[str, float] = {}
    estimates: dict[str, Mapping[str, float]] = {"agent": raw}
    if stacks is not None and stacks.samples >= STACKS_MIN:
        samples = stacks.samples
        estimates["stacks"] = _stack_shares(stacks.counts)  # beside the clock: agreement
        outside = stacks.outside_samples  # only samples the GIL did not time may size
        if outside >= SPLIT_SAMPLES:
            shares, errors = _split_unmarked(raw, _stack_shares(stacks.outside), outside)
    return RankBudget(a.pid, a.rank, "agent", shares, total / 1e9, sums.steps, samples,
                      estimates, errors, sums.spread)  # fmt: skip


def _split_unmarked(
    raw: Mapping[str, float], seen: Mapping[str, float], samples: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The agent's loop time split by what the stacks saw in it: side work its phases did not
    name (SPLITS_UNMARKED), then compute its hooks did not mark (``_unmarked_compute``);
    returns the shares and the sampling error of each the samples decided."""
    shares = dict(raw)
    errors: dict[str, float] = {}
    for name in SPLITS_UNMARKED:
        error = standard_error(seen[name], samples)
        beyond = seen[name] - shares[name]
        move = min(shares[b.LOOP], beyond) if beyond > SPLIT_Z * error else 0.0
        if move > 0:
            shares[b.LOOP] -= move
            shares[name] += move
            errors[name] = error
    err = standard_error(seen[b.LOOP], samples)
    if _unmarked_compute(shares, seen, seen[b.LOOP] + SPLIT_Z * err):
        # what is left of it lies between what the samples showed, less their error, and
        # that plus it (only the time the samples show beyond their error moved); but it is
        # unsure only by what could still be unmarked compute: the compute the samples saw,
        # plus its error, beyond what the budget now holds. Loop time the samples put in a
        # slice the agent's clock times exactly (a data wait) is no compute, and no doubt on
        # the loop (seen: 36% loop timed, 15% sampled, the other 21 points sampled as data)
        could = seen[b.COMPUTE] + standard_error(seen[b.COMPUTE], samples) - shares[b.COMPUTE]
        unsure = shares[b.LOOP] - max(0.0, seen[b.LOOP] - err)
        errors[b.LOOP] = max(0.0, min(unsure, could))
    return shares, errors


def _unmarked_compute(shares: dict[str, float], seen: Mapping[str, float], own: float) -> bool:
    """The agent's loop time beyond ``own`` (what the stacks saw in the job's own code, and
    one sampling error more: only what the samples show), up to the compute the stacks saw
    beyond the agent's, is compute the hooks do not mark: a functional loss,
    ``clip_grad_norm_``, an EMA's ``update_parameters`` (torch's Python called from the
    loop). A torch op with no Python frame (``x @ w``) looks like the job's own code to a
    stack; NVML's busy GPU moves it (``_with_gpu``)."""
    move = min(shares[b.LOOP] - own, seen[b.COMPUTE] - shares[b.COMPUTE])
    if move <= 0:
        return False
    shares[b.LOOP] -= move
    shares[b.COMPUTE] += move
    return True


def stacks_budget(p: MainPhases, stalled_s: float | None) -> RankBudget | None:
    """A process's budget from its main thread's samples alone; the still run counts as no
    progress when the job is stalled."""
    if p.samples < STACKS_MIN or p.span_s <= 0:
        return None
    shares = _stack_shares(p.counts)
    if stalled_s:
        stall = min(1.0, stalled_s / p.span_s)
        shares = {k: v * (1 - stall) for k, v in shares.items()}
        shares[b.STALL] += stall
    return RankBudget(
        p.pid, p.rank, "stacks", shares, p.span_s, 0, p.samples, {"stacks": dict(shares)}
    )


def _split_stragglers(ranks: list[RankBudget]) -> list[RankBudget]:
    """Each rank's comms wait less the part spent waiting for a rank that works longer: the
    slowest rank's work share minus its own (ranks in step: one wall clock per step)."""
    if len(ranks) < 2:
        return ranks
    most = max(r.work for r in ranks)
    out = []
    for r in ranks:
        waits = min(r.shares[b.COMMS], max(0.0, most - r.work))
        estimates = {src: _moved(est, waits) for src, est in r.estimates.items()}
        spreads = {**r.spreads, b.STRAGGLER: r.spreads.get(b.COMMS, 0.0)} if waits else r.spreads
        out.append(replace(r, shares=_moved(r.shares, waits), estimates=estimates, spreads=spreads))
    return out


def _moved(shares: Mapping[str, float], waits: float) -> dict[str, float]:
    """Shares with up to ``waits`` of the comms wait called straggler wait (each source's
    own measure is split the same way, so the sources still compare slice by slice)."""
    out = dict(shares)
    if b.COMMS in out:
        moved = min(out[b.COMMS], waits)
        out[b.COMMS] -= moved
        out[b.STRAGGLER] = out.get(b.STRAGGLER, 0.0) + moved
    return out


def _with_gpu(r: RankBudget, busy: float | None) -> RankBudget:
    """A GPU busier than the host's compute share computed through host time the loop spent
    waiting on it (an ``.item()``, a ``print(loss)``): that part of the loop is compute."""
    if busy is None:
        return r
    shares = dict(r.shares)
    move = min(shares[b.LOOP], max(0.0, busy - shares[b.COMPUTE] - AGREE))
    shares[b.LOOP] -= move
    shares[b.COMPUTE] += move
    return replace(r, shares=shares, estimates={**r.estimates, "NVML": {b.COMPUTE: busy}})


def _job_slices(r: RankBudget, busy: float | None) -> tuple[Slice, ...]:
    """The typical rank's slices; a GPU idle as long as the losses add up to (within AGREE)
    holds the loss slices that reach that long (NVML cannot tell one loss from another)."""
    lost = sum(r.shares[n] for n in b.LOSSES)
    held: tuple[str, ...] = ()
    if busy is not None and abs((1 - busy) - lost) <= AGREE:
        held = tuple(n for n in b.LOSSES if r.shares[n] >= AGREE)
    return slices_of(r, {n: ("NVML",) for n in held})


def slices_of(r: RankBudget, held: Mapping[str, tuple[str, ...]]) -> tuple[Slice, ...]:
    """A rank's slices with every source's own measure, the sampling error of the shares the
    stacks decided, the clock's spread, and the sources that hold each (``held``): the live
    budget and a recorded one alike."""
    out = []
    for name in b.SLICES:
        share = r.shares[name]
        est = tuple((src, shares[name]) for src, shares in r.estimates.items() if name in shares)
        if r.source == "stacks":
            error = standard_error(share, r.samples)
        else:
            error = r.errors.get(name, 0.0)
        out.append(Slice(name, share, est, error, held.get(name, ()), r.spreads.get(name, 0.0)))
    return tuple(out)


def budget_of(sig: RuleInputs, stalled: bool = False) -> Budget | None:
    """The job's budget from the rules' inputs: every agent with steps (ranks and a main
    process), else every main or rank process the stacks saw train. ``stalled``: the job
    stands still (``rules.stalling``), so the step in progress is no progress."""
    per_pid = {p.pid: p for p in sig.stacks.per_process} if sig.stacks is not None else {}
    still = {m.pid: m for m in sig.stacks.still} if sig.stacks is not None else {}
    ranks: list[RankBudget] = []
    for rank in sig.steps.per_rank if sig.steps is not None else ():
        pid = rank.agent.pid
        now = still[pid].phase if pid in still else None
        r = agent_budget(rank, per_pid.get(pid), stalled, now)
        if r is not None:
            ranks.append(r)
    if not ranks:  # no agent has steps: the stacks speak for every process that trains
        for p in per_pid.values():
            m = still.get(p.pid)
            r = stacks_budget(p, m.still_s if stalled and m is not None else None)
            if r is not None:
                ranks.append(r)
    if not ranks:
        return None
    busy = None
    g = sig.gpu
    if g is not None and g.util is not None and 0 <= g.util <= 100:  # a reading, not damage
        busy = g.util / 100
    ranks = [_with_gpu(r, busy) for r in _split_stragglers(ranks)]
    ranks.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else r.pid))
    job = typical(ranks, key=lambda r: (r.work, r.rank if r.rank is not None else -1))
    return Budget(_job_slices(job, busy), tuple(ranks), job)


def interval_budget(ranks: Sequence[tuple[AgentState, Sequence[StepRecord]]]) -> Budget | None:
    """The job's budget over one interval of the budget over time (``budget_bins``): each
    agent's steps that finished in it summed as its window is (side work, GC, unmarked time
    alike), the straggler split and the typical rank as ``budget_of``; nothing from the stacks
    or NVML, which sample the window, not the interval. None when no step finished in it."""
    out: list[RankBudget] = []
    for a, steps in ranks:
        sums = sums_over(steps)
        if sums is None:
            continue
        acc = dict(sums.ns)
        take_gc(acc, sums.gc)
        total = sum(acc.values())
        if not 0 < total < math.inf:
            continue
        shares = _normalised(acc)
        out.append(RankBudget(a.pid, a.rank, "agent", shares, total / 1e9, sums.steps, 0,
                              {"agent": shares}, {}, sums.spread))  # fmt: skip
    if not out:
        return None
    out = _split_stragglers(out)
    out.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else r.pid))
    job = typical(out, key=lambda r: (r.work, r.rank if r.rank is not None else -1))
    return Budget(slices_of(job, {}), tuple(out), job)
