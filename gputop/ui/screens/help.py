"""The help screen (?, h or F1): every key as mapped now, what it does, why it may be dimmed, and
what each pane means."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.ui.keys import HelpRow

PANES = [
    (
        "header",
        "the attached process (or 'no target'), the GPUs and driver, the time of the "
        "last reading and the refresh interval; PAUSED while the display is frozen",
    ),
    ("SIMULATED", "shown whenever the board is simulated (gputop demo): no real GPU is read"),
    (
        "REPLAY",
        "gputop replay: the recording's name, the playback position and speed; the panes show "
        "the recorded readings and the verdict the live screen showed at that moment",
    ),
    (
        "GPU row, line 1",
        "SM clock / its max (MHz), power / enforced limit (W), memory used / "
        "total (GiB), temperature / slowdown threshold (C); with a wide terminal, SM activity "
        "history on a fixed 0-100% scale",
    ),
    (
        "GPU row, line 2",
        "util: % of time any kernel ran (100% can still mean one busy SM); "
        "SMact: % of SMs busy, tens: tensor cores, dram: memory bandwidth (Hopper and newer); "
        "PCIe traffic to (rx) and from (tx) the GPU; power history on a 0-limit scale; and what "
        "holds the clock down (POWER CAP, THERMAL, ...)",
    ),
    (
        "colours",
        "green: at its best; yellow: worth a look (clock below 90% of max, power limit "
        "lowered, hot, util high but few SMs busy); red: slowing the job (clock held down, near "
        "slowdown temperature); dim: idle or not available",
    ),
    (
        "▶",
        "marks the selected GPU (j/k move it, enter opens it)",
    ),
    (
        "status line",
        "why the key just pressed cannot work now; that the job or target ended, with its "
        "exit status; a driver that stopped answering; problems with the config or theme "
        "files (they were skipped)",
    ),
    (
        "key bar",
        "the main keys; dim: cannot work now; '? more keys' where the terminal is too narrow "
        "for all of them (this screen lists every one)",
    ),
]


GROUPS = [
    ("Screen", ("quit", "help", "pause", "next_gpu", "prev_gpu", "detail", "theme",
                "interval_up", "interval_down")),
    ("Verdict and state", ("why", "save_snapshot")),
    ("The target (gputop --pid, gputop run)", ("dump_stacks", "capture_flame", "capture_dump",
     "capture_trace", "capture_memory", "capture_nsys", "cancel_capture", "load_agent",
     "interrupt")),
]  # fmt: skip
"""Keys by what they act on; keys of no group (replay's) come under "Playback"."""
WIDE = 110
"""From this screen width the binding ids get a column of their own; below, they follow
what the key does, dim."""


class HelpScreen(ModalScreen):
    """Every key as mapped now (config.toml may change them), by group, and what each pane
    means; scrolls (arrows, page keys) where it does not fit."""

    BINDINGS = [
        Binding("escape,q,question_mark,f1,h", "app.pop_screen", "Close", id="help.close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(self._keys(), id="help-keys")
            yield Static(self._panes(), id="help-panes")

    def _keys(self) -> Group:
        wide = self.app.size.width >= WIDE
        rows = {r[2]: r for r in self.app.key_legend.rows()}  # type: ignore[attr-defined]
        grouped = {bid for _, ids in GROUPS for bid in ids}
        rest = tuple(bid for bid in rows if bid not in grouped)
        parts: list[Any] = [Text("Keys (escape closes; arrows and page keys scroll)", "bold")]
        for title, ids in [*GROUPS, ("Playback", rest)]:
            present = [rows[bid] for bid in ids if bid in rows]
            if present:
                parts.append(_group(title, present, wide))
        if not wide:
            every = ", ".join(r[2] for r in rows.values())
            parts.append(Text(f"\nids for [keys] in config.toml: {every}", style="dim"))
        return Group(*parts)

    def _panes(self) -> Table:
        t = Table(title="Panes", title_justify="left", expand=True, box=None, padding=(0, 1))
        t.add_column("pane", style="bold", no_wrap=True)
        t.add_column("shows", ratio=1)
        for name, what in PANES:
            t.add_row(name, what)
        return t


def _group(title: str, rows: list[HelpRow], wide: bool) -> Table:
    """One group's keys; a reason all of them share ("needs a target") said once, in the
    title."""
    reasons = {r[3] for r in rows}
    shared = reasons.pop() if len(reasons) == 1 else None
    heading = f"{title} (not now: {shared})" if shared else title
    t = Table(title=heading, title_justify="left", title_style="bold underline", expand=True,
              box=None, padding=(0, 1), show_header=False)  # fmt: skip
    t.add_column("key", style="bold", no_wrap=True, min_width=9)
    t.add_column("does", ratio=1)
    if wide:
        t.add_column("id for [keys]", style="dim", no_wrap=True)
    for keys, does, binding_id, unavailable in rows:
        shown = ", ".join(_pretty(k) for k in keys.split(","))
        text = Text(does)
        if unavailable and not shared:
            text.append(f" (not now: {unavailable})", style="italic")
        t.add_row(shown, text, *([binding_id] if wide else []))
    return t


NAMES = {
    "question_mark": "?",
    "plus": "+",
    "minus": "-",
    "equals_sign": "=",
    "space": "space",
}


def _pretty(key: str) -> str:
    key = key.strip()
    return NAMES.get(key, key)
