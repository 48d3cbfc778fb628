"""A text screen: the full stack dump (key d: every Python thread of every process of the
target, also written to a file) and the verdict's full reasoning (key v)."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.render.stacks import dump_text

__all__ = ["DumpScreen", "dump_text"]


class DumpScreen(ModalScreen):
    """A scrolling text over the panes: the stack dump (key d), the verdict's reasoning (key v)."""

    BINDINGS = [Binding("escape,q,d,v", "app.pop_screen", "Close", id="dump.close")]

    def __init__(self, text: str, saved: Path | None, title: str = "Stacks now") -> None:
        super().__init__()
        self.text = text
        self.saved = saved
        self.title_text = title

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dump-body"):
            where = f" (also written to {self.saved})" if self.saved else ""
            yield Static(f"{self.title_text}{where}; escape closes", id="dump-title")
            yield Static(self.text, id="dump-text", markup=False)
