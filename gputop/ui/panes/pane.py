"""What a pane of the monitor is: a ``LinePane`` that says where it sits (``ORDER``), which
source it needs (``SOURCE``: shown only when the target has it), which readings redraw it
(``READS``), and how it draws a session's state (``draw``). ``ui/layout.py`` composes and
draws every pane ``ui/panes`` holds through this and nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from gputop.model import DeviceInfo
from gputop.session import SessionState
from gputop.ui.line_pane import LinePane


@dataclass(frozen=True, slots=True)
class Context:
    """What a pane may need beside the state: the boards watched, how the job ended (a pane
    stops counting an open phase), the verdict's principal slice (capitals in the bars)."""

    devices: tuple[DeviceInfo, ...]
    ended: str | None
    principal: str | None


class Pane(LinePane):
    """A pane of the monitor's panes box, between the header and the GPU rows."""

    ORDER: ClassVar[int] = 0
    """Top to bottom within the box (the verdict first)."""
    SOURCE: ClassVar[str | None] = None
    """The target's source it needs (``host``, ``agents``, ``stacks``); None: always shown."""
    READS: ClassVar[frozenset[str] | None] = None
    """The readings that redraw it (None: any, and each evaluation)."""

    @classmethod
    def make(cls, devices: Sequence[DeviceInfo]) -> Pane:
        """The pane for a screen over ``devices``."""
        return cls()

    def draw(self, state: SessionState, context: Context) -> None:
        """Show what ``state`` says (a pane fed from elsewhere keeps this no-op)."""
