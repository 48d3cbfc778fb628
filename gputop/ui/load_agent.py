"""Loading the agent from the screen (key a, or --attach): the plan is made on a worker thread,
a confirmation says what will be done and what it needs, the load runs on a worker thread, and
every step and the result go to the status line. The work is ``gputop.inject``'s."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

if TYPE_CHECKING:  # the loader is imported when an offer is made
    from gputop.inject.plan import LoadPlan, LoadReport
    from gputop.sources.target import TargetId


class AgentOffer:
    """What the screen needs to offer the agent to a target: its pid, whether --attach already
    said yes, the plan and the load (replaceable in tests), and what the status line says."""

    def __init__(
        self,
        pid: int,
        now: bool = False,
        plan: Callable[..., LoadPlan] | None = None,
        load: Callable[..., LoadReport] | None = None,
        identity: TargetId | None = None,
    ) -> None:
        """``identity``: the target's ``TargetId``; once it is not alive nothing is planned
        or loaded (its PID may be another process's by then)."""
        from gputop.inject import load_agent, plan_load

        self.pid = pid
        self.identity = identity
        self.now = now
        """--attach: load at start without asking (the flag was the answer)."""
        self._plan = plan or plan_load
        self._load = load or load_agent
        self.busy = False
        self.line = ""
        """The status line's text about the agent (empty: nothing to say)."""
        self.missing_said = False
        """The line says the agent is missing (cleared when one connects another way)."""

    def gone(self) -> str | None:
        """Why the target can no longer be loaded into, or None."""
        if self.identity is None or self.identity.alive():
            return None
        return self.identity.gone()

    def plan(self, roles: Mapping[int, str] | None) -> LoadPlan:
        """``roles``: the host source's latest (DataLoader workers get no agent)."""
        if (gone := self.gone()) is not None:
            raise TargetGone(gone)
        return self._plan(self.pid, roles)

    def load(self, plan: LoadPlan, progress: Callable[[str], None]) -> str:
        if (gone := self.gone()) is not None:  # asked again: the confirmation took a while
            return f"the agent was not loaded: {gone}"
        return self._load(plan, progress=progress).line()


class TargetGone(RuntimeError):
    """The target exited before the agent could be planned; the message is for the user."""


class LoadAgentScreen(ModalScreen[bool]):
    """Asks before loading: what will be done to which process and what it needs."""

    BINDINGS = [
        Binding("y,enter", "answer(True)", "Load", id="load_agent.yes"),
        Binding("n,escape,q", "answer(False)", "Cancel", id="load_agent.no"),
    ]

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="load-agent-body"):
            yield Static("Load gputop's agent into the running job?", id="load-agent-title")
            yield Static("\n".join(f"- {ln}" for ln in self.lines), markup=False)
            yield Static("y or enter: load it; n or escape: leave the job as it is")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
