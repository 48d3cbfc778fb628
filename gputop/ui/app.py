"""The live monitor: a Textual app that draws a ``Session``'s state.

Sources run on sampler threads and post each reading as a message; the app hands it to the
session (history, sinks, verdict: ``gputop/session.py``) and, unless paused, draws the state the
session returns (memray's live TUI: thread -> message -> snapshot -> thin app). Tests hand
readings to ``take``, as ``on_reading`` does, with no thread at all; replay feeds the session
from a recording instead of samplers (``ui/replay_app.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult

from gputop.config import INTERVAL_MAX, INTERVAL_MIN, Config, clamp_interval, next_interval
from gputop.model.host import HostSample
from gputop.model.steps import AgentsSample
from gputop.session import EVALUATE_GAP_S, EVALUATE_SHARE, Session, SessionState
from gputop.sources.feeds import Feed, GpuSource, Source, feeds
from gputop.ui import keys
from gputop.ui.armed_view import ArmedCaptures
from gputop.ui.capture_keys import CAPTURE_ACTIONS, CaptureKeys, event_data
from gputop.ui.header_text import header_line
from gputop.ui.layout import TARGET_PANES, MonitorPanes
from gputop.ui.leaving import catch_leave_signals, release_leave_signals
from gputop.ui.messages import CaptureUpdate, Reading, SourceTrouble
from gputop.ui.panes.captures import CaptureView
from gputop.ui.screens.detail import DetailScreen
from gputop.ui.screens.dump import DumpScreen, dump_unavailable, stack_dump, why_screen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.load_agent import AgentLoading, AgentOffer
from gputop.ui.status import StatusLines, how_it_ended
from gputop.ui.themed_app import ThemedApp
from gputop.ui.themes import MONO_THEME, next_theme

if TYPE_CHECKING:  # imported where they are used (the driver's library, the samplers)
    from gputop.arm.armed import Armed
    from gputop.run import Job
    from gputop.sources.nvml import Capabilities
    from gputop.sources.stacks import StackSource
    from gputop.ui.sampler import Samplers


@dataclass(frozen=True)
class Target:
    """The process the screen is attached to, as its header names it."""

    pid: int
    command: str


class GputopApp(ThemedApp[None]):
    """The live monitor: readings from the sampler threads go into the session, and the panes draw
    its state."""

    TITLE = "gputop"

    BINDINGS = keys.BINDINGS
    KEY_BAR = keys.KEY_BAR
    KEY_HELP = keys.KEY_HELP

    def __init__(
        self,
        feed: GpuSource | None,
        *,
        config: Config | None = None,
        target: Target | None = None,
        simulated: str | None = None,
        capabilities: Capabilities | None = None,
        start_sampler: bool = True,
        extra_problems: Sequence[str] = (),
        host: Source[HostSample] | None = None,
        agents: Source[AgentsSample] | None = None,
        job: Job | None = None,
        stacks: StackSource | None = None,
        session: Session | None = None,
        panes: frozenset[str] | None = None,
        offer: AgentOffer | None = None,
        armed: Armed | None = None,
    ) -> None:
        self.config = (config or Config()).effective()
        super().__init__(self.config)
        if session is None:
            session = Session(tuple(feed.devices) if feed is not None else ())
        self.session = session
        """Where every reading goes; the app draws the state it returns."""
        self.devices = session.devices
        self.interval = clamp_interval(self.config.interval)
        self.feeds: list[Feed] = (
            feeds(feed, host, agents, stacks, self.interval) if feed is not None else []
        )
        """The sources the sampler threads read (none in replay: its Playback feeds the
        session)."""
        if panes is None:  # replay: those the recording has
            panes = frozenset(f.kind for f in self.feeds) & TARGET_PANES
        self.panes = MonitorPanes(
            self, self.devices, panes, simulated, 20 if self.config.low_bandwidth else 40
        )
        """The screen's layout and drawing (``ui/layout.py``, the panes of ``ui/panes``)."""
        self.stacks = stacks
        self.job = job
        self.shown: SessionState = self.session.state
        """The state on screen: the session's latest, or older while paused."""
        self.capture_keys = CaptureKeys(
            target.pid if target is not None else None,
            post=lambda view: self.post_message(CaptureUpdate(view)),
            run_thread=lambda work, group: self.run_worker(work, thread=True, group=group),
            capture_dir=str(self.config.capture_dir) if self.config.capture_dir else None,
            identity=getattr(stacks, "identity", None),
        )
        self.target = target
        self.armed = (
            ArmedCaptures(armed, self.capture_keys.views, self.show_capture, self.session.event)
            if armed is not None
            else None
        )
        """Armed captures (--arm): states in, the pane's views and session events out."""
        self.agent_loading = (
            AgentLoading(offer, self, lambda: self.session.state, self._agent_changed)
            if offer is not None
            else None
        )
        """Key a and --attach (``ui/screens/load_agent.py``) where the agent can be loaded into the
        target from here; None: the key is not shown."""
        self.simulated = simulated
        self.capabilities = (
            capabilities if capabilities is not None else getattr(feed, "capabilities", None)
        )
        self.selected = 0
        self.paused = False
        self.status = StatusLines(
            self, [*self.config.problems, *extra_problems, *self.theme_problems],
            draw=self._update_status,
        )  # fmt: skip
        """What the status line says (``ui/status.py``)."""
        self._start_sampler = start_sampler
        self._samplers: Samplers | None = None
        self.key_legend = keys.KeyLegend(
            self, self.KEY_BAR, self.KEY_HELP, self.unavailable_reason,
            in_bar=lambda bid: bid != "interrupt" or self._running_job() is not None,
            in_help=lambda bid: bid != "load_agent" or self.agent_loading is not None,
        )  # fmt: skip
        """What the key bar, the help screen and a refused key's line say (``ui/keys.py``)."""
        where = str(self.config.file or "")
        self.status.problems += self.key_legend.apply_keymap(self.config.keys, where)

    # ---- layout and lifetime ----

    def compose(self) -> ComposeResult:
        yield from self.panes.widgets()

    def on_resize(self) -> None:
        self._update_header()
        self.panes.fit_soon()  # the rows the panes leave changed

    def on_mount(self) -> None:
        self._select(0)
        self.key_legend.show()
        self._update_header()
        self._update_status()
        catch_leave_signals(self._leave_on_signal)
        if self.job is not None and self.job.ending is not None:  # it came before the screen
            self.exit()
        if self._start_sampler:
            self._start_samplers()
        if self.agent_loading is not None:
            self.agent_loading.start()

    def _start_samplers(self) -> None:
        """One sampler thread per feed, and the verdict settled on a timer."""
        from gputop.ui.sampler import Samplers

        self._samplers = Samplers(self.feeds, self.post_message)
        self._samplers.start()
        # the verdict at most once a second, whichever source just read (Session.min_gap_s),
        # less often when evaluations cost more (Session.evaluate_share)
        self.session.min_gap_s = EVALUATE_GAP_S
        self.session.evaluate_share = EVALUATE_SHARE
        self.set_interval(EVALUATE_GAP_S, self._settle)

    def _settle(self) -> None:
        """The readings the verdict has not seen yet, evaluated and drawn; what armed captures
        did since."""
        if self.session.unevaluated:
            state = self.session.settle()
            if not self.paused:
                self.show(state, "verdict")
        if self.armed is not None:
            self.armed.consider(self.session.state)
            self.armed.drain()

    def on_unmount(self) -> None:
        if self._samplers is not None:
            self._samplers.stop()
        if self.armed is not None:
            self.armed.close()
        release_leave_signals()
        if self.job is not None:  # removing the loop's handlers left the default (death)
            self.job.forward_signals()

    def _leave_on_signal(self, sig: int) -> None:
        """SIGHUP (the terminal is gone) or SIGTERM: leave, restoring the terminal. A job
        started by `gputop run` gets the signal too, as it would have without gputop."""
        if self.job is not None:
            self.job.pass_on(sig)
        self.exit()

    # ---- data in: every reading goes to the session; its state is drawn unless paused ----

    def on_reading(self, message: Reading) -> None:
        self.take(message.kind, message.value)

    def take(self, kind: str, value: Any) -> None:
        """A reading of any kind, on the UI thread: stored always, drawn unless paused."""
        state = self.session.take(kind, value)
        if self.armed is not None:  # at the evaluation that names an event, not a tick later
            self.armed.consider(state)
        if not self.paused:
            self.show(state, kind)

    def on_source_trouble(self, message: SourceTrouble) -> None:
        self.status.trouble = message.text
        self._update_status()

    # ---- drawing a state ----

    def show(self, state: SessionState, changed: str | None = None) -> None:
        """Draw ``state``: the panes of the reading that ``changed`` (all when None), the
        verdict, the header; the key bar only when a key's availability changed."""
        self.shown = state
        with self.batch_update():
            self.panes.draw(state, changed, self.interval, how_it_ended(self.job, state.host))
            if changed in (None, "gpu"):
                self.refresh_detail()
            if changed in (None, "gpu", "host"):
                self._update_header()
            exited = changed == "host" and state.host is not None and state.host.state == "exited"
            if self.status.new_problems(state.problems) or exited:
                self._update_status()
        if changed in (None, "gpu", "agents", "host"):
            self.key_legend.refresh()
        if self.agent_loading is not None:
            self.agent_loading.reading(changed)

    def refresh_view(self) -> None:
        """Draw the session's latest state in full (after a pause, a seek)."""
        self.show(self.session.state)

    async def run_action(self, action: Any, default_namespace: Any = None, namespaces: Any = None):
        """A key whose action cannot work now says why on the status line (Textual would do
        nothing, and the key would look broken)."""
        mine = isinstance(action, str) and default_namespace in (None, self)
        if mine and (refusal := self.key_legend.refusal(action)):
            self.status.say_briefly(refusal)
            return True
        return await super().run_action(action, default_namespace, namespaces)

    def action_why(self) -> None:
        self.push_screen(why_screen(self.session.state))

    def refresh_detail(self) -> None:
        if isinstance(self.screen, DetailScreen):
            mono = self.current_theme.name == MONO_THEME or self.config.color == "mono"
            self.screen.draw(self.shown, colorless=mono)

    # ---- header and status ----

    def _update_header(self) -> None:
        target = f"pid {self.target.pid}: {self.target.command}" if self.target else None
        driver = self.capabilities.driver_version if self.capabilities else None
        refresh = "PAUSED" if self.paused else f"every {self.interval:g}s"
        text = header_line(target, self.shown.host, self.devices, driver, self.shown.walls,
                           refresh, self.size.width - 2)  # fmt: skip
        self.panes.header(text, self.paused)

    def _update_status(self) -> None:
        agent = self.agent_loading.status_line() if self.agent_loading is not None else ""
        ended = how_it_ended(self.job, self.shown.host)
        self.panes.status(self.status.lines(ended, agent, self.session.state.problems))

    # ---- actions ----

    def _running_job(self) -> Job | None:
        """The job of `gputop run` while it runs: ctrl+c is its (SIGINT), not a second q."""
        return self.job if self.job is not None and self.job.poll() is None else None

    def unavailable_reason(self, action: str) -> str | None:
        """Why a key cannot work now (it is dimmed in the key bar), or None when it can."""
        state = self.session.state
        if action in ("next_gpu", "prev_gpu") and len(self.devices) < 2:
            return "only one GPU"
        if action == "detail" and not self.devices:
            return "no GPU"
        if action == "detail" and isinstance(self.screen, DetailScreen):
            return "already showing the detail"
        if action == "slower" and self.interval >= INTERVAL_MAX:
            return f"already the slowest refresh ({INTERVAL_MAX:g} s)"
        if action == "faster" and self.interval <= INTERVAL_MIN:
            return f"already the fastest refresh ({INTERVAL_MIN:g} s)"
        if action == "save_snapshot" and not state.gpus:
            return "no reading yet"
        if action == "dump_stacks":
            return dump_unavailable(self.stacks)
        if action in CAPTURE_ACTIONS:
            what = action.removeprefix("capture_")
            return self.capture_keys.unavailable(what, state.agents, state.stacks)
        if action == "cancel_capture" and not self.capture_keys.running:
            return "no capture running"
        if action == "load_agent":
            return self._load_agent_unavailable()
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "load_agent" and self._load_agent_unavailable():
            return False  # shown only when it can work: a target without an agent
        return None if self.unavailable_reason(action) else True

    def action_dump_stacks(self) -> None:
        if self.stacks is not None:
            self.notify("dumping every Python thread...", timeout=2)
            self.run_worker(self._full_dump, thread=True, exclusive=True, group="dump")

    def _full_dump(self) -> None:
        """On a worker thread; the screen opens after."""
        assert self.stacks is not None  # the key works only with a stacks source
        text, saved = stack_dump(self.stacks, self.config.snapshot_dir)

        def show() -> None:
            self.push_screen(DumpScreen(text, saved))

        self.call_from_thread(show)

    # ---- loading the agent (the flow is AgentLoading's) ----

    def _load_agent_unavailable(self) -> str | None:
        if self.agent_loading is None:
            return "needs a target (gputop --pid)"
        return self.agent_loading.unavailable()

    def action_load_agent(self) -> None:
        if self.agent_loading is not None:
            self.agent_loading.press()

    def _agent_changed(self) -> None:
        self._update_status()
        self.key_legend.refresh()

    # ---- captures (the work is CaptureKeys'; the app forwards keys and draws views) ----

    def action_capture_flame(self) -> None:
        self._start_capture("flame")

    def action_capture_dump(self) -> None:
        self._start_capture("dump")

    def action_capture_trace(self) -> None:
        self._start_capture("trace")

    def action_capture_memory(self) -> None:
        self._start_capture("memory")

    def action_capture_nsys(self) -> None:
        self._start_capture("nsys")

    def _start_capture(self, what: str) -> None:
        if self.unavailable_reason(f"capture_{what}") is None:
            view = self.capture_keys.start(what)
            if view is not None:
                self.show_capture(view)

    def show_capture(self, view: CaptureView) -> None:
        """Take a capture's state and show it; its start and end are session events (recorded).
        Tests and replays call this directly."""
        taken = self.capture_keys.update(view)
        if taken is None:
            return  # a late progress message after the end
        view, news = taken
        if news:
            self.session.event("capture", event_data(view))
        self.panes.captures(self.capture_keys.views.values())
        self.key_legend.refresh()

    def on_capture_update(self, message: CaptureUpdate) -> None:
        self.show_capture(message.view)

    def action_cancel_capture(self) -> None:
        self.capture_keys.cancel()

    async def action_interrupt(self) -> None:
        """ctrl+c: the job's (SIGINT, as without gputop) while a job of `gputop run` runs;
        quits otherwise, as in htop, btop and nvitop."""
        import signal as signals

        if (job := self._running_job()) is not None:
            job.signal(signals.SIGINT)
            self.notify("sent SIGINT to the job; q leaves gputop (the job keeps running)")
        else:
            await self.action_quit()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused:
            self.refresh_view()
        self._update_header()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def _select(self, index: int) -> None:
        """The GPU at ``index`` (round), on the rows and on the detail screen if it is open."""
        if not self.devices:
            return
        self.selected = index % len(self.devices)
        self.panes.select(self.selected)
        if isinstance(self.screen, DetailScreen):
            self.screen.index = self.selected
            self.refresh_detail()

    def action_next_gpu(self) -> None:
        self._select(self.selected + 1)

    def action_prev_gpu(self) -> None:
        self._select(self.selected - 1)

    def action_detail(self) -> None:
        if self.devices:
            self.push_screen(DetailScreen(self.selected, self.devices))

    def action_next_theme(self) -> None:
        self.theme = next_theme(self.gputop_themes, self.theme)
        self.notify(f"theme: {self.theme}", timeout=2)

    def _set_interval(self, seconds: float) -> None:
        self.interval = clamp_interval(seconds)
        if self._samplers is not None:
            self._samplers.follow(self.interval)
        self._update_header()
        self.key_legend.refresh()

    def action_slower(self) -> None:
        self._set_interval(next_interval(self.interval, slower=True))

    def action_faster(self) -> None:
        self._set_interval(next_interval(self.interval, slower=False))

    def action_save_snapshot(self) -> None:
        from gputop.snapshot import save_readings

        state = self.session.state  # a reading at least: the key waits for one
        folder = self.config.snapshot_dir
        try:
            gpus = list(state.gpus.values())
            path = save_readings(
                folder, self.devices, self.capabilities, gpus, self.simulated, host=state.host
            )
        except OSError as e:
            self.notify(
                f"could not save the snapshot to {e.filename or folder}: {e.strerror or e}",
                severity="error",
            )
            return
        self.notify(f"saved {path}", timeout=4)
