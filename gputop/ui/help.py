"""The help screen (? or F1): every key as mapped now, what it does, why it may be dimmed, and
what each pane means."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

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
        "status line",
        "a driver that stopped answering, and problems with the config or theme "
        "files (they were skipped)",
    ),
]


class HelpScreen(ModalScreen):
    """Every key as mapped now (config.toml may change them) and what each pane means."""

    BINDINGS = [
        Binding("escape,q,question_mark,f1", "app.pop_screen", "Close", id="help.close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(self._keys(), id="help-keys")
            yield Static(self._panes(), id="help-panes")

    def _keys(self) -> Table:
        t = Table(title="Keys", title_justify="left", expand=True, box=None, padding=(0, 1))
        t.add_column("key", style="bold", no_wrap=True)
        t.add_column("does")
        t.add_column(Text("id (for [keys] in config.toml)"), style="dim", no_wrap=True)
        for keys, does, binding_id, unavailable in self.app.key_rows():  # type: ignore[attr-defined]
            shown = ", ".join(_pretty(k) for k in keys.split(","))
            text = Text(does)
            if unavailable:
                text.append(f"  (not now: {unavailable})", style="italic")
            t.add_row(shown, text, binding_id)
        t.add_row("escape", "close this screen or the detail screen", "")
        return t

    def _panes(self) -> Table:
        t = Table(title="Panes", title_justify="left", expand=True, box=None, padding=(0, 1))
        t.add_column("pane", style="bold", no_wrap=True)
        t.add_column("shows")
        for name, what in PANES:
            t.add_row(name, what)
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
