"""The live monitor: a Textual app fed by injected sources through a sampling thread.

The app owns the Timeline (the only history). Sources run on the Sampler's thread and post
messages; the app stores every sample, and unless paused, pushes the new state to the panes in
one batch. Tests and replays inject samples directly with ``ingest`` and no thread at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer

from gputop.config import INTERVAL_MAX, INTERVAL_MIN, Config, clamp_interval
from gputop.diagnose import State, Verdict
from gputop.diagnose.point import STACKS_WINDOW_S
from gputop.model import DeviceInfo, GpuSample, Timeline
from gputop.model.host import HostSample
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample
from gputop.sinks import Sinks
from gputop.ui.captures_text import CaptureView
from gputop.ui.detail import DetailScreen
from gputop.ui.gpu_text import short_name
from gputop.ui.help import HelpScreen
from gputop.ui.messages import (
    AgentsReady,
    CaptureUpdate,
    GpuSamplesReady,
    HostSampleReady,
    SourceTrouble,
    StacksReady,
)
from gputop.ui.themes import DEFAULT_THEME, GPUTOP_VARIABLES, all_theme_dirs, load_themes
from gputop.ui.widgets import (
    CapturesPane,
    GpuRow,
    HeaderLine,
    HostPane,
    RanksPane,
    SimBanner,
    StacksPane,
    StatusLine,
    StepPane,
    VerdictPane,
)

INTERVAL_STEPS = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
DETAIL_HISTORY_S = 300.0
STACKS_INTERVAL_S = 1.0
"""py-spy's rate: about one dump per second per main process (workers take turns)."""
CAPTURE_KINDS = {
    "flame": "pyspy-flame",
    "dump": "pyspy-dump",
    "trace": "torch-trace",
    "memory": "memory-snapshot",
    "nsys": "nsys",
}
"""The capture behind each action ``capture_<name>``."""
AGENT_KINDS = frozenset({"trace", "memory"})
"""Capture keys whose work the agent does (they need one connected)."""
CAPTURE_ACTIONS = tuple(f"capture_{name}" for name in CAPTURE_KINDS)


class GpuFeed(Protocol):
    """What the app needs from a GPU source (NvmlSource is one)."""

    @property
    def devices(self) -> tuple[DeviceInfo, ...]: ...

    def sample(self) -> list[GpuSample]: ...


class AgentFeed(Protocol):
    """What the app needs from the agent link (AgentLink is one)."""

    def sample(self) -> AgentsSample: ...


class HostFeed(Protocol):
    """What the app needs from the host source (HostSource is one)."""

    pid: int

    def sample(self) -> HostSample: ...


@dataclass(frozen=True)
class Target:
    pid: int
    command: str


class GputopApp(App):
    CSS_PATH = "gputop.tcss"
    TITLE = "gputop"
    ENABLE_COMMAND_PALETTE = False

    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("space,p", "pause", "Pause", id="pause"),
        Binding("question_mark,f1", "help", "Help", id="help"),
        Binding("j,down", "next_gpu", "Next", id="next_gpu"),
        Binding("k,up", "prev_gpu", "Prev", id="prev_gpu"),
        Binding("enter", "detail", "Detail", id="detail"),
        Binding("t", "next_theme", "Theme", id="theme"),
        Binding("plus,equals_sign", "slower", "Slower", id="interval_up"),
        Binding("minus", "faster", "Faster", id="interval_down"),
        Binding("s", "save_snapshot", "Save", id="save_snapshot"),
        Binding("v", "why", "Why", id="why"),
        Binding("d", "dump_stacks", "Dump stacks", id="dump_stacks"),
        Binding("f", "capture_flame", "Flame", id="capture_flame"),
        Binding("c", "capture_dump", "Capture", id="capture_dump"),
        Binding("r", "capture_trace", "Trace", id="capture_trace"),
        Binding("m", "capture_memory", "Memory", id="capture_memory"),
        Binding("n", "capture_nsys", "Nsys", id="capture_nsys"),
        Binding("x", "cancel_capture", "Cancel", id="cancel_capture"),
        Binding("ctrl+c", "interrupt", "Interrupt job", id="interrupt", priority=True),
    ]
    HELP = {
        "quit": "leave gputop (the terminal is restored)",
        "pause": "freeze the display; collection goes on, nothing is lost",
        "help": "this screen",
        "next_gpu": "select the next GPU",
        "prev_gpu": "select the previous GPU",
        "detail": "open the selected GPU: every value, why values are missing, charts",
        "theme": "switch to the next theme",
        "interval_up": "refresh less often (fewer bytes over ssh)",
        "interval_down": "refresh more often",
        "save_snapshot": "write the current state as JSON (same schema as `gputop snapshot`)",
        "why": "the full reasoning: every rule, fired or not, with its numbers and levers",
        "dump_stacks": "dump every Python thread of the target now (nonblocking), also to a file",
        "interrupt": "send SIGINT to the job started by `gputop run` (like ctrl+c without gputop)",
        "capture_flame": "record a flame graph of the target and its workers for a few seconds "
        "(py-spy, nonblocking) into ./gputop-captures",
        "capture_dump": "write every thread's stack now into a capture folder (text and JSON)",
        "capture_trace": "profile 3 steps with torch.profiler in every process that runs "
        "gputop's agent (a chrome trace per rank, for Perfetto or Holistic Trace Analysis)",
        "capture_memory": "a CUDA memory snapshot over 5 steps in every process that runs "
        "gputop's agent (what allocated the memory; open it at pytorch.org/memory_viz)",
        "capture_nsys": "record an Nsight Systems window of a job started by "
        "`gputop run --nsys` (nsys cannot attach to other jobs: the reason says how to relaunch)",
        "cancel_capture": "stop the running captures, keeping what they recorded",
    }

    def __init__(
        self,
        feed: GpuFeed,
        config: Config | None = None,
        target: Target | None = None,
        simulated: str | None = None,
        capabilities: Any = None,
        start_sampler: bool = True,
        extra_problems: Sequence[str] = (),
        host: HostFeed | None = None,
        agents: AgentFeed | None = None,
        job: Any = None,
        stacks: Any = None,
        sinks: Sinks | None = None,
    ) -> None:
        self.config = (config or Config()).effective()
        super().__init__()
        self.feed = feed
        self.host = host
        self.host_latest: HostSample | None = None
        self.agents = agents
        self.agents_latest: AgentsSample | None = None
        self.job = job
        self.stacks = stacks
        self.stacks_latest: StacksSample | None = None
        self.captures: dict[int, CaptureView] = {}
        self._capture_cancels: dict[int, threading.Event] = {}
        self.capture_seconds = 10.0
        self.capture_dir: str | None = (
            str(self.config.capture_dir) if self.config.capture_dir is not None else None
        )
        """None: $GPUTOP_CAPTURE_DIR or ./gputop-captures."""
        self.sinks = sinks if sinks is not None else Sinks()
        """The recorder and the exporter: every reading the app ingests, in order."""
        self.verdict: Verdict | None = None
        self.verdict_now = 0.0
        self._verdict_state = State()
        self.devices = tuple(feed.devices)
        self.target = target
        self.simulated = simulated
        self.capabilities = (
            capabilities if capabilities is not None else getattr(feed, "capabilities", None)
        )
        self.timeline = Timeline()
        self.latest: dict[int, GpuSample] = {}
        self.selected = 0
        self.paused = False
        self.interval = clamp_interval(self.config.interval)
        self.trouble = ""
        self._problems = [*self.config.problems, *extra_problems]
        self._start_sampler = start_sampler
        self._samplers: list[Any] = []
        themes, theme_problems = load_themes(all_theme_dirs(self.config.themes_dir))
        self._problems += theme_problems
        self.gputop_themes = [t.name for t in themes]
        for theme in themes:
            self.register_theme(theme)
        wanted = self.config.theme
        if self.config.color == "mono" and wanted == DEFAULT_THEME:
            wanted = "gputop-mono"
        if wanted not in self.available_themes:
            self._problems.append(f"theme {wanted!r} not found; using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME
        self.theme = wanted
        if self.config.keys:
            self.set_keymap(dict(self.config.keys))

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {f"gputop-{k}": v for k, v in GPUTOP_VARIABLES.items()}

    # ---- layout ----

    def compose(self) -> ComposeResult:
        yield HeaderLine(id="header")
        if self.simulated:
            yield SimBanner(f"SIMULATED {self.simulated} (not a real GPU)", id="sim-banner")
        yield VerdictPane()
        if self.host is not None:
            yield HostPane()
        if self.agents is not None:
            yield StepPane()
            yield RanksPane()
        if self.stacks is not None:
            yield StacksPane()
        yield CapturesPane()
        with VerticalScroll(id="gpus"):
            spark = 20 if self.config.low_bandwidth else 40
            for d in self.devices:
                yield GpuRow(d, spark_width=spark)
        yield StatusLine(id="status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._select(0)
        self._update_header()
        self._update_status()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGHUP, signal.SIGTERM):
                loop.add_signal_handler(sig, self.exit)
        if self._start_sampler:
            from gputop.sources.watchdog import Watchdog
            from gputop.ui.sampler import Sampler

            self._samplers.append(
                Sampler(
                    read=self.feed.sample,
                    deliver=lambda samples: self.post_message(GpuSamplesReady(samples)),
                    fail=lambda text: self.post_message(SourceTrouble(text)),
                    interval=self.interval,
                )
            )
            if self.host is not None:
                self._samplers.append(
                    Sampler(
                        read=self.host.sample,
                        deliver=lambda sample: self.post_message(HostSampleReady(sample)),
                        fail=lambda text: self.post_message(SourceTrouble(text)),
                        interval=self.interval,
                        watchdog=Watchdog("the process reader", timeout=5.0),
                        name="gputop-host-sampler",
                    )
                )
            if self.agents is not None:
                self._samplers.append(
                    Sampler(
                        read=self.agents.sample,
                        deliver=lambda sample: self.post_message(AgentsReady(sample)),
                        fail=lambda text: self.post_message(SourceTrouble(text)),
                        interval=min(self.interval, 1.0),
                        max_interval=1.0,  # steps are fast: read them at least every second
                        watchdog=Watchdog("the agent link", timeout=5.0),
                        name="gputop-agent-sampler",
                    )
                )
            if self.stacks is not None:
                self._samplers.append(
                    Sampler(
                        read=self.stacks.sample,
                        deliver=lambda sample: self.post_message(StacksReady(sample)),
                        fail=lambda text: self.post_message(SourceTrouble(text)),
                        interval=STACKS_INTERVAL_S,
                        fixed=True,
                        watchdog=Watchdog("py-spy", timeout=30.0),
                        name="gputop-stacks-sampler",
                    )
                )
            for sampler in self._samplers:
                sampler.start()

    def on_unmount(self) -> None:
        for sampler in self._samplers:
            sampler.stop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGHUP, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    # ---- data in ----

    def ingest(self, samples: Sequence[GpuSample]) -> None:
        """Store samples (always) and show them (unless paused). Called on the UI thread."""
        for s in samples:
            self.timeline.append(s.key, s)
            self.latest[s.index] = s
        if self.sinks:
            self.sinks.gpu(samples)
        self.compute_verdict()
        if not self.paused:
            self.refresh_view()

    def on_gpu_samples_ready(self, message: GpuSamplesReady) -> None:
        self.ingest(message.samples)

    def ingest_host(self, sample: HostSample) -> None:
        """Store a host sample (always) and show it (unless paused)."""
        self.timeline.append(sample.key, sample)
        self.host_latest = sample
        if self.sinks:
            self.sinks.host(sample)
        self.compute_verdict()
        if not self.paused:
            with self.batch_update():
                self.query_one(HostPane).show(sample)
                self._show_verdict()
                self._update_header()

    def on_host_sample_ready(self, message: HostSampleReady) -> None:
        self.ingest_host(message.sample)

    def ingest_agents(self, sample: AgentsSample) -> None:
        """Store what the agents reported (always) and show it (unless paused)."""
        self.timeline.append(sample.key, sample)
        self.agents_latest = sample
        if self.sinks:
            self.sinks.agents(sample)
        self.compute_verdict()
        if not self.paused:
            self._show_agents()

    def _show_agents(self) -> None:
        if self.agents_latest is None or self.agents is None:
            return
        gpu = self.devices[0].name if self.devices else None
        with self.batch_update():
            self.query_one(StepPane).show(self.agents_latest, gpu)
            self.query_one(RanksPane).show(self.agents_latest)
            self._show_verdict()

    def on_agents_ready(self, message: AgentsReady) -> None:
        self.ingest_agents(message.sample)

    def ingest_stacks(self, sample: StacksSample) -> None:
        self.timeline.append(sample.key, sample)
        self.stacks_latest = sample
        if self.sinks:
            self.sinks.stacks(sample)
        self.compute_verdict()
        if not self.paused:
            self._show_stacks()

    def _show_stacks(self) -> None:
        if self.stacks_latest is None or self.stacks is None:
            return
        window = self.timeline.window(
            self.stacks_latest.key, self.stacks_latest.t, STACKS_WINDOW_S
        ).samples
        self.query_one(StacksPane).show(window)
        self._show_verdict()

    def on_stacks_ready(self, message: StacksReady) -> None:
        self.ingest_stacks(message.sample)

    def on_source_trouble(self, message: SourceTrouble) -> None:
        self.trouble = message.text
        self._update_status()

    def history(self, index: int, seconds: float) -> tuple[GpuSample, ...]:
        latest = self.latest.get(index)
        if latest is None:
            return ()
        return self.timeline.window(("gpu", index), latest.t, seconds).samples

    def refresh_view(self) -> None:
        with self.batch_update():
            for row in self.query(GpuRow):
                seconds = (row.spark_width + 1) * self.interval
                row.show(self.latest.get(row.info.index), self.history(row.info.index, seconds))
            if self.host_latest is not None and self.host is not None:
                self.query_one(HostPane).show(self.host_latest)
            self._show_agents()
            self._show_stacks()
            self._show_verdict()
            self._update_header()
            self.refresh_detail()
            if self.sinks.problems:
                self._update_status()
        self._refresh_bindings_if_changed()

    def all_bindings(self) -> list[Binding]:
        """This app's keys and those a subclass (replay) adds: Textual merges them the same way."""
        out: list[Binding] = []
        for cls in reversed(type(self).__mro__):
            if isinstance(cls, type) and issubclass(cls, GputopApp):
                out += [b for b in cls.__dict__.get("BINDINGS", []) if isinstance(b, Binding)]
        return out

    def _refresh_bindings_if_changed(self) -> None:
        """The footer is redrawn only when a key becomes usable or unusable."""
        state = tuple(self.unavailable_reason(b.action) for b in self.all_bindings())
        if state != getattr(self, "_binding_state", None):
            self._binding_state = state
            self.refresh_bindings()

    def compute_verdict(self) -> Verdict | None:
        """Every rule over the recent windows; hysteresis state carried between calls. Once
        per reading ingested, paused or not (the hysteresis counts evaluations, and the
        recorder and exporter see every one)."""
        from gputop.diagnose.point import EvalPoint, evaluate_at

        if not self.latest:
            return None
        h, st = self.host_latest, self.stacks_latest
        point = EvalPoint(
            now=max(s.t for s in self.latest.values()),
            host=(h.key, h.t) if h is not None else None,
            stacks=(st.key, st.t) if st is not None else None,
        )
        self.verdict, self._verdict_state, _ = evaluate_at(
            self.timeline, self.devices, point, self.agents_latest, self._verdict_state
        )
        self.verdict_now = point.now
        if self.sinks:
            self.sinks.verdict(point, self.verdict)
        return self.verdict

    def _show_verdict(self) -> None:
        self.query_one(VerdictPane).show(self.verdict, self.verdict_now)

    def action_why(self) -> None:
        from gputop.ui.dump import DumpScreen
        from gputop.ui.verdict_text import reasoning_text

        self.push_screen(DumpScreen(reasoning_text(self.verdict), None, title="Why: every rule"))

    def refresh_detail(self) -> None:
        screen = self.screen
        if isinstance(screen, DetailScreen):
            d = self.devices[screen.index]
            screen.show(
                d,
                self.latest.get(d.index),
                self.history(d.index, DETAIL_HISTORY_S),
                colorless=self.current_theme.name == "gputop-mono" or self.config.color == "mono",
            )

    # ---- header and status ----

    def _update_header(self) -> None:
        who = f"pid {self.target.pid}: {self.target.command}" if self.target else "no target"
        if self.host_latest is not None and self.host_latest.state == "exited":
            code = self.host_latest.exit_code
            who = f"pid {self.host_latest.pid} EXITED" + (f" ({code})" if code is not None else "")
        names = {short_name(d.name) for d in self.devices}
        board = f"{len(self.devices)}x {', '.join(sorted(names))}" if self.devices else "no GPU"
        if self.capabilities is not None:
            board += f"  drv {self.capabilities.driver_version}"
        walls = [s.wall for s in self.latest.values()]
        when = time.strftime("%H:%M:%S", time.localtime(max(walls))) if walls else "--:--:--"
        state = "PAUSED" if self.paused else f"every {self.interval:g}s"
        self.query_one(HeaderLine).update(f"gputop  {who}  {board}  {when} {state}")
        self.query_one(HeaderLine).set_class(self.paused, "-paused")

    def _update_status(self) -> None:
        if self.sinks.problems:  # a sink that stopped (disk full, port taken) says so once
            self._problems += self.sinks.problems
            self.sinks.problems.clear()
        lines = [self.trouble] if self.trouble else []
        lines += self._problems
        status = self.query_one(StatusLine)
        status.update("\n".join(lines))
        status.display = bool(lines)

    # ---- actions ----

    def unavailable_reason(self, action: str) -> str | None:
        """Why a key cannot work now (it is dimmed in the footer), or None when it can."""
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
        if action == "save_snapshot" and not self.latest:
            return "no reading yet"
        if action == "dump_stacks" and self.stacks is None:
            return "needs a target (--pid or gputop run)"
        if action in CAPTURE_ACTIONS:
            return self._capture_unavailable(action.removeprefix("capture_"))
        if action == "cancel_capture" and not any(
            v.status == "running" for v in self.captures.values()
        ):
            return "no capture running"
        if action == "interrupt" and self.job is None:
            return "only for a job started by `gputop run`"
        if action == "interrupt" and self.job.poll() is not None:
            return "the job has exited"
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "interrupt" and self.job is None:
            return False  # not shown at all outside `gputop run`
        return None if self.unavailable_reason(action) else True

    def action_dump_stacks(self) -> None:
        if self.stacks is not None:
            self.notify("dumping every Python thread...", timeout=2)
            self.run_worker(self._full_dump, thread=True, exclusive=True, group="dump")

    def _full_dump(self) -> None:
        """On a worker thread (py-spy takes tens of ms per process); the screen opens after."""
        from gputop.ui.dump import dump_text

        results = self.stacks.dump_all()
        text = dump_text(results)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = self.config.snapshot_dir / f"gputop-stacks-{stamp}.txt"
        saved = None
        try:
            from gputop.snapshot import write_private_text

            write_private_text(path, text)
            saved = path
        except OSError as e:
            text = f"(could not save to {path}: {e.strerror or e})\n\n" + text
        self.call_from_thread(self._show_dump, text, saved)

    def _show_dump(self, text: str, saved: Path | None) -> None:
        from gputop.ui.dump import DumpScreen

        self.push_screen(DumpScreen(text, saved))

    # ---- captures ----

    @cached_property
    def _py_spy(self) -> str | None:
        """Looked up once: the footer asks every tick whether the keys can work."""
        from gputop.sources.stacks import find_py_spy

        return find_py_spy()

    @cached_property
    def _nsys_missing(self) -> str | None:
        """Why the nsys key cannot work for this target, found once (a job's environment and
        PATH do not change under it)."""
        from gputop.capture import nsys

        if nsys.find_nsys() is None:
            return "nsys is not on PATH (install the Nsight Systems CLI)"
        if self.target is None or nsys.session_of(self.target.pid) is None:
            return "not started under nsys: relaunch with gputop run --nsys"
        return None

    def _capture_unavailable(self, what: str) -> str | None:
        if self.target is None:
            return "needs a target (--pid or gputop run)"
        if what == "nsys":
            if self._nsys_missing:
                return self._nsys_missing
        elif what in AGENT_KINDS:
            agents = self.agents_latest.agents if self.agents_latest is not None else ()
            if not any(a.state == "connected" for a in agents):
                return "needs gputop's agent in the job (gputop run, or gputop.agent.init())"
        elif self._py_spy is None:
            return "py-spy is not installed (pip install py-spy)"
        elif (denied := self._ptrace_denied()) is not None:
            return denied
        kind = CAPTURE_KINDS[what]
        if any(v.kind == kind and v.status == "running" for v in self.captures.values()):
            return "one is running (x cancels it)"
        return None

    def _ptrace_denied(self) -> str | None:
        """The stacks source's own finding that py-spy may not read the target, if it made it."""
        latest = self.stacks_latest
        main = next((p for p in latest.processes if p.role == "main"), None) if latest else None
        if main is not None and main.error and "(ptrace)" in main.error:
            return main.error
        return None

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
        if self.target is None or self._capture_unavailable(what):
            return
        kind = CAPTURE_KINDS[what]
        key = max(self.captures, default=0) + 1
        cancel = self._capture_cancels[key] = threading.Event()
        self.show_capture(CaptureView(key, kind, self.target.pid))
        pid = self.target.pid
        self.run_worker(
            lambda: self._capture(key, kind, pid, cancel), thread=True, group=f"capture-{key}"
        )

    def _capture(self, key: int, kind: str, pid: int, cancel: threading.Event) -> None:
        """On a worker thread: the capture runs to its end; every change goes out as a message."""
        from gputop.capture.folder import CaptureError, capture_root
        from gputop.capture.take import Bounds, take

        view = CaptureView(key, kind, pid)
        post = self.post_message

        def progress(p) -> None:
            post(CaptureUpdate(replace(view, done=p.done, total=p.total, unit=p.unit)))

        def started(folder: Path) -> None:
            nonlocal view
            view = replace(view, folder=str(folder))
            post(CaptureUpdate(view))

        seconds = self.capture_seconds if kind in ("pyspy-flame", "nsys") else None
        try:
            m, folder = take(kind, pid, capture_root(self.capture_dir), Bounds(seconds),
                             cancel, progress, started)  # fmt: skip
            view = replace(view, status=m.status, reason=m.reason, folder=str(folder))
        except CaptureError as e:
            view = replace(view, status="failed", reason=str(e))
        except Exception as e:  # a capture must never take the monitor down
            view = replace(view, status="failed", reason=f"{type(e).__name__}: {e}")
        post(CaptureUpdate(view))

    def show_capture(self, view: CaptureView) -> None:
        """Record a capture's state and show it (tests and replays call this directly)."""
        old = self.captures.get(view.key)
        if old is not None and old.status != "running":
            return  # a late progress message after the end
        if old is not None and not view.folder:
            view = replace(view, folder=old.folder)
        self.captures[view.key] = view
        if self.sinks and (old is None or view.status != "running"):  # start and end, not ticks
            import time

            data = {f: getattr(view, f) for f in ("kind", "pid", "status", "folder", "reason")}
            self.sinks.event(time.monotonic(), time.time(), "capture", {"id": view.key, **data})
        if view.status != "running":
            self._capture_cancels.pop(view.key, None)
        self.query_one(CapturesPane).show(list(self.captures.values()))
        self._refresh_bindings_if_changed()

    def on_capture_update(self, message: CaptureUpdate) -> None:
        self.show_capture(message.view)

    def action_cancel_capture(self) -> None:
        for cancel in self._capture_cancels.values():
            cancel.set()

    def action_interrupt(self) -> None:
        import signal as signals

        if self.job is not None and self.job.poll() is None:
            self.job.signal(signals.SIGINT)
            self.notify("sent SIGINT to the job; q leaves gputop (the job keeps running)")

    def action_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused:
            self.refresh_view()
        self._update_header()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def _select(self, index: int) -> None:
        if not self.devices:
            return
        self.selected = index % len(self.devices)
        for row in self.query(GpuRow):
            row.set_class(row.info.index == self.selected, "-selected")
        with contextlib.suppress(Exception):
            self.query_one(f"#gpu-{self.selected}", GpuRow).scroll_visible(animate=False)

    def action_next_gpu(self) -> None:
        self._select(self.selected + 1)
        if isinstance(self.screen, DetailScreen):
            self.screen.index = self.selected
            self.refresh_detail()

    def action_prev_gpu(self) -> None:
        self._select(self.selected - 1)
        if isinstance(self.screen, DetailScreen):
            self.screen.index = self.selected
            self.refresh_detail()

    def action_detail(self) -> None:
        if self.devices:
            self.push_screen(DetailScreen(self.selected))

    def action_next_theme(self) -> None:
        names = self.gputop_themes or [DEFAULT_THEME]
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def _set_interval(self, seconds: float) -> None:
        self.interval = clamp_interval(seconds)
        for sampler in self._samplers:
            if not sampler.fixed:
                sampler.set_interval(min(self.interval, sampler.max_interval))
        self._update_header()
        self._refresh_bindings_if_changed()

    def action_slower(self) -> None:
        later = [s for s in INTERVAL_STEPS if s > self.interval]
        self._set_interval(later[0] if later else INTERVAL_MAX)

    def action_faster(self) -> None:
        sooner = [s for s in INTERVAL_STEPS if s < self.interval]
        self._set_interval(sooner[-1] if sooner else INTERVAL_MIN)

    def action_save_snapshot(self) -> None:
        from gputop.snapshot import build_document, write_private_json

        if not self.latest:
            self.notify("nothing to save yet: no reading has arrived", severity="warning")
            return
        doc = build_document(
            self.devices,
            self.capabilities,
            list(self.latest.values()),
            self.simulated,
            host=self.host_latest,
        )
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(max(self.latest_walls())))
        path = self.config.snapshot_dir / f"gputop-snapshot-{stamp}.json"
        try:
            write_private_json(path, doc)
        except OSError as e:
            self.notify(
                f"could not save the snapshot to {path}: {e.strerror or e}", severity="error"
            )
            return
        self.notify(f"saved {path}", timeout=4)

    def latest_walls(self) -> list[float]:
        return [s.wall for s in self.latest.values()]

    # ---- help ----

    def key_rows(self) -> list[tuple[str, str, str, str | None]]:
        """(keys, what it does, binding id, why it is unavailable now) for every app binding."""
        keymap = getattr(self, "_keymap", {}) or {}
        rows = []
        for b in self.all_bindings():
            assert isinstance(b, Binding) and b.id is not None
            keys = keymap.get(b.id, b.key)
            rows.append(
                (keys, self.HELP.get(b.id, b.description), b.id, self.unavailable_reason(b.action))
            )
        return rows
