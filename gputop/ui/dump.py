"""A text screen: the full stack dump (key d: every Python thread of every process of the
target, also written to a file) and the verdict's full reasoning (key v)."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.model.stacks import ThreadStack


def dump_text(results: list[tuple[int, str, list[ThreadStack] | None, str | None]]) -> str:
    out = []
    for pid, role, threads, error in results:
        out.append(f"== pid {pid} ({role})")
        if error:
            out.append(f"   {error}")
            continue
        for t in threads or []:
            state = "active" if t.active else "waiting"
            out.append(f"-- thread {t.tid} {t.name} [{state}] phase: {t.phase}")
            for f in t.frames:
                out.append(f"     {f.name} ({f.file}:{f.line or '?'})")
        out.append("")
    return "\n".join(out) + "\n"


class DumpScreen(ModalScreen):
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
