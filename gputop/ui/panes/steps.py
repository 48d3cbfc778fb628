"""The step and ranks panes as styled text: pure functions over agent states.

The first step an agent reports includes start-up (imports, model build), so statistics skip
it. Shares are of the summed step time over the recent window, in pipeline order, with the
time no marker covered shown as "unmarked".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text

from gputop.diagnose import COMMS_SHARE, DATA_WAIT_WARN, FLOOR, SIDE_SHARE, step_limit_s
from gputop.model.budget import Budget
from gputop.model.ranks import main_agent, rank_work, ranked
from gputop.model.step_stats import gc_share, median_ms, mfu_of, phase_shares, tail_ms, usable
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.model.window import percentile
from gputop.session import SessionState
from gputop.ui.budget_cells import runs, stack
from gputop.ui.gpu_text import Line, StyleFor, spark
from gputop.ui.line_fit import ellipsize
from gputop.ui.panes.pane import Context, Pane
from gputop.vocab import budget as slices
from gputop.vocab import steps as step

SHOWN = 0.005
"""Shares under this round to 0%: not listed."""
SHORT = {
    step.DATA_WAIT: "data",
    "h2d": "h2d",
    step.FORWARD: "fwd",
    step.BACKWARD: "bwd",
    step.GRAD_SYNC: "sync",
    step.OPTIMIZER: "opt",
    step.CHECKPOINT: "ckpt",
    step.EVAL: "eval",
    step.LOG: "log",
    step.EVAL_LOG: "eval",
    step.OTHER: "other",
    step.UNMARKED: "unmarked",
}
BAR_CHARS = {
    step.DATA_WAIT: "░",
    "h2d": "▒",
    step.FORWARD: "▓",
    step.BACKWARD: "█",
    step.GRAD_SYNC: "▚",
    step.OPTIMIZER: "▞",
    step.CHECKPOINT: "▪",
    step.EVAL: "▪",
    step.LOG: "▪",
    step.EVAL_LOG: "▪",
}


def _rate(steps: Sequence[StepRecord], field: str) -> float | None:
    counts = [getattr(s, field) for s in steps]
    if not steps or any(c is None for c in counts):
        return None
    seconds = sum(s.dur_ns for s in steps) / 1e9
    return sum(counts) / seconds if seconds else None


def _human(v: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:.1f}{unit}"
    return f"{v:.0f}"


def step_lines(
    a: AgentState,
    style: StyleFor,
    width: int,
    gpu_name: str | None = None,
    ended: str | None = None,
) -> list[Text]:
    """``ended``: how the job ended ("the job ended (status 0)"), once it has: the phase it
    was in stops counting up (it is the last phase, not what runs now)."""
    steps = usable(a.steps)
    head = Line(style).add(" steps ", "name")
    if a.state != "connected":
        head.add(f"agent {a.state} ", "warn" if a.state == "reconnecting" else "dim")
    if not steps:
        head.label(f"pid {a.pid}: waiting for the first steps")
        return [head.text]
    durs = [s.dur_ns for s in steps]
    med = median_ms(durs) or 0.0  # steps is not empty: a median exists
    p90 = percentile(sorted(durs), 90) / 1e6
    head.label(f"#{steps[-1].step}  step ").add(f"{med:.0f} ms").label(f" (p90 {p90:.0f})  ")
    spark_w = max(8, min(30, width - 100))
    head.add(spark([d / 1e6 for d in durs], 0, 2 * med, spark_w), "spark")
    for field, unit in (("samples", "samples/s"), ("tokens", "tok/s")):
        rate = _rate(steps, field)
        if rate is not None:
            head.label(f"  {_human(rate)} {unit}")
    mfu = mfu_of(steps, [gpu_name] if gpu_name else [], a.fingerprint)
    if mfu.value is not None and mfu.peak_flops:
        head.label("  MFU ").add(f"{100 * mfu.value:.0f}%")
        head.label(f" of {round(mfu.peak_flops / 1e12, 1):g} TFLOP/s {mfu.precision}")
        if mfu.precision_assumed:
            head.add(" (precision assumed)", "dim")
    elif any(s.flops is not None for s in steps):  # FLOPs reported, no peak: say why
        head.label("  MFU ").add(f"n/a ({mfu.note})", "dim")
    shares = phase_shares(steps)
    bar_w = max(20, min(50, width // 3))
    bar = Line(style).label(" ")
    for name, share in shares:
        n = round(share * bar_w)
        if n:
            bar.add(BAR_CHARS.get(name, "·") * n, phase_level(name, share))
    bar.label("  ")
    for name, share in shares:
        if share >= SHOWN:
            bar.label(f"{SHORT.get(name, name[:10])} ").add(
                f"{share:.0%}  ", phase_level(name, share)
            )
    gc, full = gc_share(steps)  # inside the phases above, so after them and not in the bar
    if gc is not None and gc >= SHOWN:
        bar.label("| gc pauses ").add(f"{gc:.0%}", "warn" if gc > SIDE_SHARE else "value")
        if full:
            bar.label(f" ({full} full)")
    if ended is not None or a.state == "exited":  # not "now": nothing runs any more
        now = Line(style).label(" end ").add(ended or f"pid {a.pid} exited", "dim")
        if a.open_phase:
            now.label(f"; its last phase was {a.open_phase}")
    elif a.open_phase:
        now = Line(style).label(" now ")
        overdue = (a.open_age_s or 0) > step_limit_s(tail_ms(durs, 0.99))  # the hang rule's
        level = "bad" if overdue else "value"
        now.add(f"{a.open_phase} for {a.open_age_s or 0:.1f} s", level)
    else:
        now = Line(style).label(" now ")
        now.label(f"between phases, {a.since_step_s or 0:.1f} s since the last step")
    fp = a.fingerprint
    loader = fp.get("dataloader")
    if isinstance(loader, Mapping) and loader:
        now.label(f"  workers {loader.get('num_workers')} pin {loader.get('pin_memory')}")
    if fp.get("intra_op_threads") is not None:
        now.label(f"  torch threads {fp['intra_op_threads']}")
    if "OMP_NUM_THREADS" in fp:
        now.label(f"  OMP {fp['OMP_NUM_THREADS'] or 'unset'}")
    return [ellipsize(line.text, width) for line in (head, bar, now)]


def phase_level(name: str, share: float) -> str:
    """A phase's colour by the rules' own thresholds: a batch wait the data-input rule counts
    (DATA_WAIT_WARN) and one big enough to be the verdict's principal (the budget's FLOOR); a
    gradient sync from FLOOR, bad where the comms rule fires (COMMS_SHARE); side work (eval,
    checkpoints, logging) where the side-work rule fires (SIDE_SHARE)."""
    if name == step.DATA_WAIT:
        return "bad" if share >= FLOOR else "warn" if share > DATA_WAIT_WARN else "value"
    if name == step.GRAD_SYNC:
        return "bad" if share > COMMS_SHARE else "warn" if share >= FLOOR else "value"
    if name in step.SIDE_PHASES:
        return "warn" if share > SIDE_SHARE else "value"
    return "value"


BAR_FROM = 110
"""Columns (the pane's: a 120-column terminal's less its margin) from which each rank's line
carries a stacked bar of its own budget."""
BAR_MIN = 12
"""A bar narrower than this says too little: none is drawn."""


def rank_lines(
    agents: Sequence[AgentState],
    style: StyleFor,
    width: int,
    budget: Budget | None = None,
    principal: str | None = None,
) -> list[Text]:
    """One line per rank: step, work (step minus sync wait) and sync wait, medians; the
    straggler (``model.ranks``: the one the verdict names) marked; with the verdict's budget,
    the rank's largest loss (the budget's per-rank shares), and from ``BAR_FROM`` columns a
    stacked bar of its slices (``ui/budget_cells.py``'s marks, ``principal``'s in capitals):
    the ranks that wait for a straggler show its letter at a glance."""
    ranks = rank_work(agents)
    own = {r.pid: r for r in budget.ranks} if budget is not None else {}
    straggler = ranks.straggler
    bars = width >= BAR_FROM and bool(own)
    heads: list[Line] = []
    tails: list[Line | None] = []
    for a in agents:
        line = Line(style).label(f" rank {a.rank if a.rank is not None else '?':>3} ")
        line.label(f"pid {a.pid:<7} ")
        r = ranks.row(a.pid)
        if r is None:
            line.add("no steps yet", "dim")
            heads.append(line)
            tails.append(None)
            continue
        slowest = straggler is not None and straggler.row.pid == a.pid
        wide = width >= 100 and not bars  # shorter labels, so "slowest" still fits
        line.label("step ").add(f"{r.step_ms:6.1f} ms")
        line.label("  work ").add(f"{r.work_ms:6.1f} ms", "bad" if slowest else "value")
        line.label("  sync wait " if wide or bars else "  sync ").add(f"{r.sync_ms:6.1f} ms")
        tail = Line(style)
        if slowest:
            tail.add("  slowest: the others wait for it" if wide else "  slowest", "bad")
        mine = own.get(a.pid)
        if mine is not None:
            name, share = max(((n, mine.shares[n]) for n in slices.LOSSES), key=lambda x: x[1])
            level = "bad" if share >= FLOOR else "value"
            tail.label("  most lost: " if not bars else "  ").add(
                f"{name} {round(100 * share)}%", level
            )
        if a.state != "connected":
            tail.add(f"  {a.state}", "dim")
        heads.append(line)
        tails.append(tail)
    stepping = [(h, t) for h, t in zip(heads, tails, strict=True) if t is not None]
    used = max((len(h.text.plain) for h, _ in stepping), default=0)
    rest = max((len(t.text.plain) for _, t in stepping), default=0)
    w = width - used - rest - 3
    bars = bars and bool(stepping) and w >= BAR_MIN
    rows = []
    for a, head, end in zip(agents, heads, tails, strict=True):
        if end is None:
            rows.append(head.text)
            continue
        mine = own.get(a.pid)
        if bars and mine is not None:
            head.add(" " * (used - len(head.text.plain) + 2))
            head.text.append_text(runs(stack(mine.shares, w, principal), style))
        rows.append(ellipsize(head.text + end.text, width))
    return rows


class StepPane(Pane):
    """The training step of the main rank, split into phases (from the in-process agent)."""

    ORDER = 30
    SOURCE = "agents"
    READS = frozenset({"agents", "host"})

    def draw(self, state: SessionState, context: Context) -> None:
        if state.agents is not None:
            gpu = context.devices[0].name if context.devices else None
            self.show(state.agents, gpu, context.ended)

    def __init__(self) -> None:
        super().__init__(id="steps")
        self.agents: AgentsSample | None = None
        self.gpu_name: str | None = None
        self.ended: str | None = None

    def show(self, agents: AgentsSample, gpu_name: str | None, ended: str | None = None) -> None:
        """``ended``: how the job ended, once it has (the phase shown stops counting)."""
        self.agents, self.gpu_name, self.ended = agents, gpu_name, ended
        self.display = bool(agents.agents)
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        primary = main_agent(self.agents)
        if primary is None:
            return []
        return step_lines(primary, self.style_for, width, self.gpu_name, self.ended)


class RanksPane(Pane):
    """One row per rank: step time, work time and sync wait (shown with two or more ranks)."""

    ORDER = 40
    SOURCE = "agents"

    def draw(self, state: SessionState, context: Context) -> None:
        if state.agents is not None:  # each rank's budget too
            budget = state.verdict.budget if state.verdict is not None else None
            self.show(state.agents, budget, context.principal)

    def __init__(self) -> None:
        super().__init__(id="ranks")
        self.agents: AgentsSample | None = None
        self.budget: Budget | None = None
        self.principal: str | None = None

    def show(
        self, agents: AgentsSample, budget: Budget | None = None, principal: str | None = None
    ) -> None:
        """``budget``: the verdict's, whose ranks say where each rank's time goes;
        ``principal``: its principal's slice (capitals in the bars). The same reading and
        budget again (a reading of another source came) draws nothing."""
        if agents is self.agents and budget is self.budget and principal == self.principal:
            return
        self.agents, self.budget, self.principal = agents, budget, principal
        self.display = len(ranked(agents)) > 1
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        agents = ranked(self.agents)
        return rank_lines(agents, self.style_for, width, self.budget, self.principal)
