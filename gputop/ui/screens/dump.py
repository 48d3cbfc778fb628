"""A text screen: the full stack dump (key d: every Python thread of every process of the
target, also written to a file) and the verdict's full reasoning (key v)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.render.stacks import dump_text
from gputop.session import SessionState

if TYPE_CHECKING:  # py-spy's source is the target's, made by the command
    from gputop.sources.stacks import StackSource


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


def dump_unavailable(stacks: StackSource | None) -> str | None:
    """Why key d cannot dump the target's stacks now, or None: there is no target, or it is
    gone (it exited; its PID may be another process's now)."""
    if stacks is None:
        return "needs a target (--pid or gputop run)"
    identity = getattr(stacks, "identity", None)
    return identity.gone() if identity is not None and not identity.alive() else None


def stack_dump(stacks: StackSource, folder: Path) -> tuple[str, Path | None]:
    """Every Python thread of the target now, as text, and the file it was also written to
    (None: it could not be, and the text begins with why). On a worker thread: py-spy takes
    tens of ms per process."""
    from gputop.snapshot import save_stack_dump

    text = dump_text(stacks.dump_all())
    try:
        return text, save_stack_dump(folder, text)
    except OSError as e:
        where = e.filename or folder
        return f"(could not save to {where}: {e.strerror or e})\n\n" + text, None


def why_screen(state: SessionState) -> DumpScreen:
    """The verdict's full reasoning: every rule, fired or not, with its numbers and levers."""
    from gputop.model.setup import setup_of
    from gputop.ui.panes.verdict import reasoning_text

    inputs = state.inputs
    setup = setup_of(inputs.steps.fingerprint) if inputs and inputs.steps else None
    return DumpScreen(reasoning_text(state.verdict, setup), None, title="Why: every rule")
