"""The step-time budget: for each rank, the window's wall time split into slices that add up
to 100% (model compute, data wait, H2D, exposed comms wait, straggler wait, evaluation,
checkpointing, logging, GC, the loop's own Python, no progress). Pure.

Each slice comes from the best source present: the agent's phases (its clock, every step),
then the main thread's stack samples (one a second), then NVML for what the host cannot see
(a GPU busy through a ``.item()`` the loop waits in is computing, not looping). The agent's
unmarked time is split by the stacks where they say what it was (an eval pass's metrics, a
logging call). Every source that measured a slice is kept beside it; those within ``AGREE`` of
the chosen size are its agreement, which is the verdict's confidence, never its rank
(TensorFlow Profiler's step-time breakdown, HTA's temporal breakdown, Lightning's
SimpleProfiler: the biggest share first).

The job's budget is its typical rank's: the lower median by work, so the rank shown waits as
long as most ranks do (with one straggler among eight, a rank that waits for it; of two, the
one that waits). Every rank's own budget is kept for the ranks pane, diagnose and /metrics.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gputop.diagnose.findings import confidence
from gputop.diagnose.signals import SPIKE, RuleInputs
from gputop.diagnose.step_sums import phase_slice, sums_of
from gputop.model.ranks import MAIN_RANK
from gputop.model.stack_stats import TORCH_OP, MainPhases
from gputop.model.steps import AgentState
from gputop.vocab import budget as b
from gputop.vocab import stacks as stack

FLOOR = 0.10
"""A loss slice under this share of wall time is no bound: below it the job is compute-bound
(TensorFlow Profiler calls under 5% of the step "not input-bound" and 5-20% "moderately"; ten
points is where a fix pays for the change it asks)."""
HELD_FLOOR = 0.8 * FLOOR
"""A loss slice shown as the principal stays while it is at least this (8%): two readings
either side of the floor do not flip the verdict, and a loss that has settled under it (a
start-up wait that scrolled out of the window) gives way."""
AGREE = 0.10
"""Two sources agree on a slice when their shares are this close (ten points of the step):
a stack share from 30 dumps is good to about that, and the verdict's floor is ten points."""
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
SPLITS_UNMARKED = (b.EVAL, b.CHECKPOINT, b.LOG)
"""Slices the stacks may find inside the agent's unmarked time (an eval pass's metrics between
its forwards, a logging call, a save the hooks did not see)."""


@dataclass(frozen=True, slots=True)
class Slice:
    """One slice of the job's budget: its share of wall time and who measured it."""

    name: str
    share: float
    estimates: tuple[tuple[str, float], ...] = ()
    """(source, share) from every source that measured it: agent, stacks, NVML."""
    error: float = 0.0
    """The share's sampling error: one standard error of a share of stack samples (0 for the
    agent's clock, which times every step)."""
    corroborated: tuple[str, ...] = ()
    """Sources that do not measure the slice but whose reading holds it (a GPU idle as long as
    the losses add up to)."""

    @property
    def low(self) -> float:
        """The share the measure vouches for: less its sampling error."""
        return max(0.0, self.share - self.error)

    @property
    def agree(self) -> tuple[str, ...]:
        """The sources whose own measure is within AGREE of the share, then those that hold it."""
        measured = tuple(src for src, v in self.estimates if abs(v - self.share) <= AGREE)
        return measured + tuple(c for c in self.corroborated if c not in measured)

    @property
    def confidence(self) -> float:
        """From how many sources agree on its size (``findings.confidence``)."""
        return confidence(len(self.agree))


@dataclass(frozen=True)
class RankBudget:
    """One rank's (or the main process's) budget over the window."""

    pid: int
    rank: int | None
    source: str
    """What its shares rest on: "agent" (its clock, refined by the stacks) or "stacks"."""
    shares: Mapping[str, float]
    """Every slice (``vocab.budget.SLICES``), adding up to 1."""
    seconds: float
    """Wall time the window covers."""
    steps: int = 0
    """Steps the agent timed in it (0: from the stacks)."""
    samples: int = 0
    """Stack samples its shares rest on (all of them from the stacks alone; ``errors``' of an
    agent's)."""
    estimates: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Per source, its own shares before they were combined (agreement)."""
    errors: Mapping[str, float] = field(default_factory=dict)
    """An agent rank's slices whose share the stacks' samples decided (its unmarked time split
    by them), with the share the samples vouch for taken off: their sampling error."""

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"

    @property
    def rank_key(self) -> str:
        """Its rank label in /metrics and the report (a script's main process is "0")."""
        return str(self.rank) if self.rank is not None else MAIN_RANK

    @property
    def work(self) -> float:
        """Its share doing its own work: all but waiting for others and standing still."""
        return 1.0 - self.shares[b.COMMS] - self.shares[b.STRAGGLER] - self.shares[b.STALL]


@dataclass(frozen=True)
class Budget:
    """The job's budget (its typical rank's) and every rank's."""

    slices: tuple[Slice, ...]
    """Every slice in ``SLICES`` order, adding up to 1."""
    ranks: tuple[RankBudget, ...]
    typical: RankBudget
    """The rank the job's slices are (lower median by work)."""

    def share(self, name: str) -> float:
        return next((s.share for s in self.slices if s.name == name), 0.0)

    def slice(self, name: str) -> Slice:
        return next(s for s in self.slices if s.name == name)

    @property
    def source(self) -> str:
        return self.typical.source

    def losses(self) -> list[Slice]:
        """The loss slices, largest first (ties in pipeline order)."""
        return sorted((s for s in self.slices if s.name in b.LOSSES), key=lambda s: -s.share)

    def line(self, width: int = 80) -> str:
        """The budget as one stacked line, compute first, then the losses largest first, in
        whole percent ("compute 52 | eval 33 | data 10 | loop 5"); slices under half a percent
        are left out, and the smallest go first when the line would pass ``width``."""
        return stacked(self.typical.shares, width)

    def table(self) -> list[str]:
        """The budget in full, as the why screen and ``diagnose`` print it: each slice with
        every source's own measure and which agree, then each rank's line."""
        r = self.typical
        over = f"{r.steps} steps" if r.steps else f"{r.samples} stack samples"
        sources = sorted({src for x in self.slices for src, _ in x.estimates})
        out = [
            f"Step-time budget of {r.label} ({over}, {r.seconds:.0f} s; from {r.source}):",
            f"  {'slice':<24}{'share':>7}" + "".join(f"{s:>8}" for s in sources) + "  agree",
        ]
        for x in self.slices:
            if x.share < 0.005 and all(v < 0.005 for _, v in x.estimates):
                continue
            own = dict(x.estimates)
            cells = "".join(
                f"{round(100 * own[s]):>7}%" if s in own else f"{'':>8}" for s in sources
            )
            out.append(
                f"  {b.NAMES[x.name]:<24}{round(100 * x.share):>6}%{cells}  {', '.join(x.agree)}"
            )
        if len(self.ranks) > 1:
            out.append("  per rank:")
            out += [f"    {q.label:<10} {stacked(q.shares, 200)}" for q in self.ranks]
        return out

    def document(self) -> dict[str, object]:
        """The budget as JSON (``diagnose --json``, docs/diagnose.md): the job's slices with
        each source's measure and agreement, and every rank's shares."""
        r = self.typical

        def rank(q: RankBudget) -> dict[str, object]:
            return {
                "rank": q.rank,
                "pid": q.pid,
                "source": q.source,
                "seconds": round(q.seconds, 3),
                "steps": q.steps,
                "samples": q.samples,
                "shares": {n: round(q.shares[n], 4) for n in b.SLICES},
            }

        return {
            "version": 1,
            "floor": FLOOR,
            "of": rank(r),
            "slices": [
                {
                    "name": x.name,
                    "share": round(x.share, 4),
                    "low": round(x.low, 4),
                    "estimates": {src: round(v, 4) for src, v in x.estimates},
                    "agree": list(x.agree),
                }
                for x in self.slices
            ],
            "ranks": [rank(q) for q in self.ranks],
        }

    @property
    def lost(self) -> float:
        """Every loss slice together: the share of the step not spent computing."""
        return sum(s.share for s in self.slices if s.name in b.LOSSES)


def stacked(shares: Mapping[str, float], width: int = 80) -> str:
    """Shares as one line, compute first, then the rest largest first (``Budget.line``)."""
    rest = sorted((n for n in b.LOSSES if shares.get(n, 0) >= 0.005), key=lambda n: -shares[n])
    parts = [f"{n} {round(100 * shares.get(n, 0))}" for n in (b.COMPUTE, *rest)]
    while len(parts) > 1 and len(" | ".join(parts)) > width:
        parts.pop()
    return " | ".join(parts)


def _zero() -> dict[str, float]:
    return dict.fromkeys(b.SLICES, 0.0)


def _normalised(acc: dict[str, float]) -> dict[str, float]:
    """Shares that add up to 1, each held to [0, 1] (rounding in the sums)."""
    total = sum(acc.values())
    if not total > 0:
        return acc
    return {k: min(1.0, max(0.0, v / total)) for k, v in acc.items()}


def _take_gc(acc: dict[str, float], gc: float) -> None:
    gc = min(gc, sum(acc.values()))
    first = min(gc, acc[b.LOOP])
    acc[b.LOOP] -= first
    rest = gc - first
    others = sum(v for k, v in acc.items() if k != b.GC)
    if rest > 0 and others > 0:
        for k in acc:
            if k != b.GC:
                acc[k] -= rest * acc[k] / others
    acc[b.GC] += gc


def _in_progress(a: AgentState, median_s: float) -> float:
    """Seconds of the step in progress that count (0 unless overdue)."""
    since = a.since_step_s
    if since is None or a.state == "exited" or not 0 <= since <= OVERDUE_MAX_S:
        return 0.0  # no clock, or one no running step gives (a damaged reading)
    return since if since > max(OVERDUE_S, SPIKE * median_s) else 0.0


def _stack_shares(p: MainPhases) -> dict[str, float]:
    acc = _zero()
    for phase, n in p.counts:
        acc[STACK_SLICE.get(phase, b.LOOP)] += n
    return _normalised(acc)


def agent_budget(
    a: AgentState, stacks: MainPhases | None, stalled: bool, stack_now: str | None = None
) -> RankBudget | None:
    """One agent's budget over its long window (``signals.long_window``), its unmarked time
    split by the stacks where they say what it was; None before STEPS_MIN steps."""
    sums = sums_of(a, STEPS_MIN)
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
    _take_gc(acc, sums.gc)
    total = sum(acc.values())
    if not 0 < total < math.inf:
        return None  # nothing timed, or numbers no clock gives
    raw = _normalised(acc)
    shares, samples = raw, 0
    errors: dict[str, float] = {}
    estimates: dict[str, Mapping[str, float]] = {"agent": raw}
    if stacks is not None and stacks.samples >= STACKS_MIN:
        samples = stacks.samples
        estimates["stacks"] = seen = _stack_shares(stacks)
        shares, errors = _split_unmarked(raw, seen, samples)
    return RankBudget(a.pid, a.rank, "agent", shares, total / 1e9, sums.steps, samples,
                      estimates, errors)  # fmt: skip


def _split_unmarked(
    raw: Mapping[str, float], seen: Mapping[str, float], samples: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The agent's loop time split by what the stacks saw in it: side work its phases did not
    name (SPLITS_UNMARKED), then compute its hooks did not mark (``_unmarked_compute``);
    returns the shares and the sampling error of each the samples decided."""
    shares = dict(raw)
    errors: dict[str, float] = {}
    for name in SPLITS_UNMARKED:
        move = min(shares[b.LOOP], max(0.0, seen[name] - shares[name]))
        if move > 0:
            shares[b.LOOP] -= move
            shares[name] += move
            errors[name] = standard_error(seen[name], samples)
    err = standard_error(seen[b.LOOP], samples)
    if _unmarked_compute(shares, seen, seen[b.LOOP] + err):
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


def standard_error(share: float, samples: int) -> float:
    """One standard error of a share of ``samples`` stack samples; a share none of them showed
    is taken as one in ``samples`` (no sample is no proof of none)."""
    seen = max(share, 1 / samples) if samples > 0 else 0.0
    return (seen * (1 - seen) / samples) ** 0.5 if 0 < seen < 1 else 0.0


def stacks_budget(p: MainPhases, stalled_s: float | None) -> RankBudget | None:
    """A process's budget from its main thread's samples alone; the still run counts as no
    progress when the job is stalled."""
    if p.samples < STACKS_MIN or p.span_s <= 0:
        return None
    shares = _stack_shares(p)
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
        out.append(replace(r, shares=_moved(r.shares, waits), estimates=estimates))
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


def _typical(ranks: Sequence[RankBudget]) -> RankBudget:
    by_work = sorted(ranks, key=lambda r: (r.work, r.rank if r.rank is not None else -1))
    return by_work[(len(by_work) - 1) // 2]


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
    stacks decided, and the sources that hold each (``held``): the live budget and a recorded
    one alike."""
    out = []
    for name in b.SLICES:
        share = r.shares[name]
        est = tuple((src, shares[name]) for src, shares in r.estimates.items() if name in shares)
        if r.source == "stacks":
            error = standard_error(share, r.samples)
        else:
            error = r.errors.get(name, 0.0)
        out.append(Slice(name, share, est, error, held.get(name, ())))
    return tuple(out)


def budget_of(sig: RuleInputs, stalled: bool = False) -> Budget | None:
    """The job's budget from the rules' inputs: every agent with steps (ranks and a main
    process), else every main or rank process the stacks saw train. ``stalled``: the job
    stands still (``rules.stalling``), so the step in progress is no progress."""
    per_pid = {p.pid: p for p in sig.stacks.per_process} if sig.stacks is not None else {}
    still = {m.pid: m for m in sig.stacks.still} if sig.stacks is not None else {}
    ranks: list[RankBudget] = []
    agents: Iterable[AgentState] = sig.steps.agents if sig.steps is not None else ()
    for a in agents:
        now = still[a.pid].phase if a.pid in still else None
        r = agent_budget(a, per_pid.get(a.pid), stalled, now)
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
    typical = _typical(ranks)
    return Budget(_job_slices(typical, busy), tuple(ranks), typical)
