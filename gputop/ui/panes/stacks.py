"""The stacks pane as styled text: pure functions over a window of stack samples."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from gputop.diagnose import IDLE_DUMPS, STALL_NOTE_S, WORKER_PEGGED
from gputop.model.roles import RANK, WORKER
from gputop.model.stack_stats import hottest_frames, stillness, thread_shares
from gputop.model.stacks import Frame, ProcessStacks, StacksSample
from gputop.session import SessionState
from gputop.ui.gpu_text import Line, StyleFor
from gputop.ui.line_fit import ellipsize
from gputop.ui.panes.pane import Context, Pane
from gputop.vocab import stacks as stack

MAX_THREAD_LINES = 6
STILL_S = STALL_NOTE_S
STILL_IDLE = IDLE_DUMPS
"""A main thread idle on one stack this long (the verdict says "no progress" from STILL_S) in
this share of its dumps (the hang rule's own) is shown as standing still: where a hang would
be, seconds before the verdict's own limit (hang rule: rules.hung)."""
NARROW = 120
"""Below this width frames are named without their class."""
WAITING = {stack.DATA_WAIT, stack.COLLECTIVE_WAIT, stack.LOCK_WAIT, stack.HOST_SYNC}
"""Phases a main thread waits in, shown as a warning."""


def _where(f: Frame, short: bool = False) -> str:
    """``short`` (a narrow pane): the function without its class, so the file and line fit."""
    name = f.name.rsplit(".", 1)[-1] if short else f.name
    return f"{name} ({f.file.rsplit('/', 1)[-1]}:{f.line or '?'})"


def _fresh(p: ProcessStacks | None, now: float) -> str:
    """'  (agent, 1 s ago)': who read a process's stacks and how long ago, when known."""
    age = p.age(now) if p is not None else None
    return f"  ({p.via}, {age:.0f} s ago)" if p is not None and age is not None else ""


def _age(p: ProcessStacks | None, now: float) -> float | None:
    return p.age(now) if p is not None else None


def _thread(pid: int, name: str, ranks: dict[int, int | None], children: dict[int, int]) -> str:
    """A thread's name, a rank's main thread named for its rank ("rank 1"), the main thread
    of a process a rank started for that rank ("child of r1"), never as the rank itself."""
    if name == "MainThread" and pid in ranks:
        return f"rank {ranks[pid] if ranks[pid] is not None else '?'}"
    if name == "MainThread" and pid in children:
        return f"child of r{children[pid]}"[:12]
    return name[:12]


def stack_lines(window: Sequence[StacksSample], style: StyleFor, width: int) -> list[Text]:
    """The pane's lines, each cut at a word with an ellipsis where it does not fit."""
    short = width < NARROW
    return [ellipsize(line, width) for line in _stack_lines(window, style, short)]


def _stack_lines(window: Sequence[StacksSample], style: StyleFor, short: bool) -> list[Text]:
    if not window:
        return [Line(style).add(" stacks ", "name").label("waiting for the first dump").text]
    latest = window[-1]
    if latest.problem:
        return [Line(style).add(" stacks ", "name").add(latest.problem, "bad").text]
    lines: list[Text] = []
    errors = [p for p in latest.processes if p.error]
    ranks = {p.pid: p.rank for p in latest.processes if p.role == RANK}
    children = {p.pid: p.of_rank for p in latest.processes if p.of_rank is not None}
    procs = {p.pid: p for p in latest.processes}
    shown = 0
    threads = thread_shares(window)
    for s in threads:
        if s.role == WORKER or shown >= MAX_THREAD_LINES:
            continue
        if s.name != "MainThread" and s.shares[0][0] in (stack.IDLE, stack.BLOCKED):
            continue  # helper threads that wait are not news
        shown += 1
        t = s.last
        line = Line(style).add(" stacks " if not lines else "        ", "name")
        line.label(f"{s.pid} {_thread(s.pid, s.name, ranks, children):<12} ").add(
            f"{t.phase:<15}", "warn" if t.phase in WAITING else "value"
        )
        if t.deciding is not None:
            line.label(f" {_where(t.deciding, short)}")
        line.label("  [")
        line.label(" ".join(f"{p} {share:.0%}" for p, share in s.shares[:4]))
        line.label("]" + _fresh(procs.get(s.pid), latest.t))
        lines.append(line.text)
    workers = [s for s in threads if s.role == WORKER and s.name == "MainThread"]
    if workers:
        fetch = sum(dict(s.shares).get(stack.FETCH, 0.0) for s in workers) / len(workers)
        ages = [a for s in workers if (a := _age(procs.get(s.pid), latest.t)) is not None]
        oldest = f" (read by py-spy in turn, the oldest {max(ages):.0f} s ago)" if ages else ""
        lines.append(
            Line(style)
            .label(f"        {len(workers)} DataLoader workers sampled: fetching ")
            .add(f"{fetch:.0%}", "warn" if fetch > WORKER_PEGGED else "value")  # as busy as pegged
            .label(" of the time" + oldest)
            .text
        )
    hot = hottest_frames(window, 3)
    if hot:
        total = sum(c for _, c in hot)
        lines.append(
            Line(style)
            .label("        hot: ")
            .label("  ".join(f"{_where(f, short)} {c / total:.0%}" for f, c in hot))
            .text
        )
    for u in stillness(window):
        if u.still_s < STILL_S or u.idle_share < STILL_IDLE:
            continue  # moving, or working on one line (CPU): not standing still
        at = f" at {_where(u.caller)}" if u.caller and u.caller != u.leaf else ""
        where = f"{u.leaf.name}{at}" if u.leaf else u.phase
        lines.append(
            Line(style)
            .add(f"        pid {u.pid}: same stack for {u.still_s:.0f} s, idle, in {where}", "bad")
            .text
        )
    for p in errors[:2]:
        lines.append(Line(style).add(f"        {p.error}", "bad").text)
    return lines or [Line(style).add(" stacks ", "name").label("no Python threads seen").text]


class StacksPane(Pane):
    """Where the Python threads are: phase, deciding frame, shares over the last minute."""

    ORDER = 50
    SOURCE = "stacks"
    READS = frozenset({"stacks"})

    def draw(self, state: SessionState, context: Context) -> None:
        if state.stacks is not None:
            self.show(state.stacks_window())

    def __init__(self) -> None:
        super().__init__(id="stacks")
        self.window: Sequence[StacksSample] = ()

    def show(self, window: Sequence[StacksSample]) -> None:
        self.window = window
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        return stack_lines(self.window, self.style_for, width)
