"""Loading the agent from the screen (key a, or --attach): the plan is made on a worker thread,
a confirmation says what will be done and what it needs, the load runs on a worker thread, and
every step and the result go to the status line. The work is ``gputop.inject``'s; the flow is
``AgentLoading``'s, which the app owns and forwards the key to (as ``CaptureKeys`` holds the
capture keys'), so that the screen only draws its line."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.session import SessionState
from gputop.sources.agent_link import NO_STEPS

if TYPE_CHECKING:  # the loader is imported when an offer is made
    from gputop.inject.plan import LoadPlan, LoadReport
    from gputop.sources.target import TargetId


WORKERS = "load_agent"
"""The worker group of the plan and the load."""
LOADED = "the agent is loaded"


class AgentOffer:
    """What the screen needs to offer the agent to a target: its pid, whether --attach already
    said yes, the plan and the load (replaceable in tests)."""

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


class AgentLoading:
    """Key a and --attach for one target: a first look at start, the plan on a worker thread,
    the confirmation, the load on a worker thread, and the status line's words at each step.
    ``state``: the session's latest (the host's roles, whether an agent is connected);
    ``changed``: the app redraws its status line and key bar (called on the app's thread)."""

    def __init__(
        self,
        offer: AgentOffer,
        app: App,
        state: Callable[[], SessionState],
        changed: Callable[[], None],
    ) -> None:
        self.offer = offer
        self._app = app
        self._state = state
        self._changed = changed
        self.busy = False
        self.line = ""
        """The status line's text about the agent (empty: nothing to say)."""
        self.missing_said = False
        """The line says the agent is missing (cleared when one connects another way)."""

    def unavailable(self) -> str | None:
        """Why key a cannot work now, or None."""
        if self.busy:
            return "loading the agent"
        if (gone := self.offer.gone()) is not None:
            return gone
        agents = self._state().agents
        if agents is not None and any(a.state == "connected" for a in agents.agents):
            return LOADED
        return None

    def status_line(self) -> str:
        """What the status line says about the agent now (empty: nothing); a line saying it is
        missing goes once the target is gone (nothing to load into)."""
        if self.line and self.missing_said and self.offer.gone() is not None:
            self.line, self.missing_said = "", False
        return self.line

    def start(self) -> None:
        """The first look, on a worker thread, as the screen opens."""
        self._app.run_worker(self._first_look, thread=True, group=WORKERS)

    def press(self) -> None:
        """Key a: the plan, then the confirmation."""
        if self.unavailable() is None:
            self.busy = True
            self.line = "checking what loading the agent needs..."
            self._changed()
            self._app.run_worker(lambda: self._plan_then(confirm=True), thread=True,
                                 group=WORKERS)  # fmt: skip

    def reading(self, kind: str | None) -> None:
        """A reading of ``kind`` was drawn (None: all): an agent that connected another way
        (the script imported it) takes the line saying it is missing away."""
        if kind in (None, "agents") and self.missing_said and self.unavailable() == LOADED:
            self.missing_said, self.line = False, ""
            self._changed()

    def _roles(self) -> dict[int, str] | None:
        """pid -> role from the latest host reading (the sampler's; read, never sampled here)."""
        host = self._state().host
        return {p.pid: p.role for p in host.processes} if host is not None else None

    def _say(self, line: str, missing: bool = False) -> None:
        """From a worker thread: the agent's line on the status line; ``missing``: it says the
        agent is missing (set before the line shows: an agent reading may come at once)."""
        self.missing_said = missing
        self.line = line
        self._app.call_from_thread(self._changed)

    def _first_look(self) -> None:
        """At start: with --attach, load; else say in one line that the agent is missing and
        how to load it (nothing when it is there)."""
        if self.offer.gone() is not None:
            return  # exited before the screen opened: the host pane says so
        if self.offer.now:
            self._plan_then(confirm=False)
            return
        plan = self.offer.plan(self._roles())
        pid = self.offer.pid
        if not plan.todo and plan.refusals:  # the key would fail: say why once, offer nothing
            self._say(f"pid {pid} has no gputop agent, and it cannot be loaded ({NO_STEPS}): "
                      f"{plan.refusals[0]}")  # fmt: skip
        elif not plan.nothing_to_do:
            self._say(f"pid {pid} has no gputop agent ({NO_STEPS}): press a to load it",
                      missing=True)  # fmt: skip
        self._app.call_from_thread(self._changed)

    def _plan_then(self, confirm: bool) -> None:
        """On a worker thread: the plan; then the confirmation (key a) or the load (--attach)."""
        self.busy = True
        try:
            plan = self.offer.plan(self._roles())
        except Exception as e:  # a plan reads /proc: never take the screen down
            plan = None
            self._say(f"cannot load the agent: {e}")
        if plan is None or not plan.todo:
            if plan is not None:
                self._say(plan.summary())
            self.busy = False
            self._app.call_from_thread(self._changed)
            return
        if confirm:
            self._app.call_from_thread(self._confirm, plan)
        else:
            self._load(plan)

    def _confirm(self, plan: LoadPlan) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self._app.run_worker(lambda: self._load(plan), thread=True, group=WORKERS)
            else:
                self.busy = False
                self.line = "the agent was not loaded (a loads it)"
                self._changed()

        self._app.push_screen(LoadAgentScreen(plan.lines()), answered)

    def _load(self, plan: LoadPlan) -> None:
        """On a worker thread: the load, its steps and its result on the status line."""
        try:
            self._say(self.offer.load(plan, progress=self._say))
        except Exception as e:
            self._say(f"loading the agent failed: {e}")
        finally:
            self.busy = False
            self._app.call_from_thread(self._changed)


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
