"""`gputop replay FILE`: the live screen over a recording, with pause, seek and speed keys.

The panes are fed the recorded readings in their recorded order and timing (scaled by the
speed). The verdict shown is the recorded one (what the live screen showed); a Player
recomputes it at the same evaluation points from the same readings, gives the why-screen
its full reasoning, and the status line says so if the two ever differ (a recording made
by a gputop whose rules have since changed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from textual.binding import Binding
from textual.css.query import NoMatches

from gputop.config import Config
from gputop.model import Timeline
from gputop.record.reader import Record, Recording
from gputop.record.replay import Player, same
from gputop.ui.app import GputopApp, Target
from gputop.ui.captures_text import CaptureView
from gputop.ui.widgets import SimBanner

TICK_S = 0.1
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0)
SEEK_S = 10.0
LEAD_S = 60.0
"""History replayed before a seek target: the longest window a pane or rule reads."""
LIVE_ONLY = "not while replaying a recording"


class _Recorded:
    """Stands for a source that was recorded (its pane is shown); never sampled."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid


class _Feed:
    def __init__(self, devices: tuple) -> None:
        self.devices = devices
        self.capabilities = None

    def sample(self) -> list:
        return []


class ReplayApp(GputopApp):
    BINDINGS = [
        Binding("left", "seek(-10)", "-10s", id="seek_back", priority=True),
        Binding("right", "seek(10)", "+10s", id="seek_forward", priority=True),
        Binding("shift+left", "seek(-60)", "-1min", id="seek_back_long", show=False),
        Binding("shift+right", "seek(60)", "+1min", id="seek_forward_long", show=False),
        Binding("left_square_bracket", "speed(-1)", "Slower", id="speed_down"),
        Binding("right_square_bracket", "speed(1)", "Faster", id="speed_up"),
        Binding("home", "seek_to(0)", "Start", id="seek_start", show=False),
        Binding("end", "seek_end", "End", id="seek_end", show=False),
    ]
    HELP = {
        **GputopApp.HELP,
        "pause": "stop or resume the playback",
        "seek_back": "back 10 s (shift: 1 min)",
        "seek_forward": "forward 10 s (shift: 1 min)",
        "seek_back_long": "back 1 min",
        "seek_forward_long": "forward 1 min",
        "speed_down": "play slower (down to 0.25x)",
        "speed_up": "play faster (up to 64x)",
        "seek_start": "back to the start",
        "seek_end": "to the end",
    }

    def __init__(self, recording: Recording, config: Config | None = None,
                 speed: float = 1.0) -> None:  # fmt: skip
        session = recording.session
        pid = session.get("pid") if isinstance(session.get("pid"), int) else None
        recorded = _Recorded(pid) if pid is not None else None
        command = session.get("command")
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        super().__init__(
            _Feed(recording.devices),
            config=config,
            target=Target(pid, str(command or "?")) if pid is not None else None,
            simulated=_label(recording),
            start_sampler=False,
            host=recorded,
            agents=recorded,
            stacks=recorded,
        )
        interval = session.get("interval")
        if isinstance(interval, int | float) and 0.1 <= interval <= 60:
            self.interval = float(interval)
        self.recording = recording
        self.speed = min(SPEEDS, key=lambda s: abs(s - speed))
        self.playing = True
        self.at = 0.0
        """Seconds since the recording's first reading (the playback clock)."""
        self.start_t, self.end_t = recording.span()
        self.mismatch: str | None = None
        self._reset(0.0)

    # ---- playback ----

    def on_mount(self) -> None:
        super().on_mount()
        self._timer = self.set_interval(TICK_S, self._tick)
        self._show_position()

    def on_unmount(self) -> None:
        self._timer.stop()  # no tick may draw into panes being torn down
        super().on_unmount()

    def _reset(self, lead_from: float) -> None:
        self.timeline = Timeline()
        self.latest.clear()
        self.host_latest = self.agents_latest = self.stacks_latest = None
        self.verdict = None
        self.player = Player(self.recording)
        self._records: Iterator[Record] = self.recording.records(start=self.start_t + lead_from)
        self._next: Record | None = next(self._records, None)

    def _tick(self) -> None:
        if not self.playing:
            return
        try:
            self._advance(self.at + TICK_S * self.speed, display=True)
        except NoMatches:  # a last tick while the app closes: its panes are already gone
            self.playing = False

    def _advance(self, to: float, display: bool) -> None:
        """Apply every record up to ``to``; the panes are redrawn once at the end."""
        held = self.paused
        self.paused = True  # the ingest methods store without drawing
        try:
            while self._next is not None and self._next.t - self.start_t <= to:
                self._apply(self._next)
                self._next = next(self._records, None)
        finally:
            self.paused = held
        self.at = min(to, self.end_t - self.start_t)
        if self._next is None:
            self.playing = False
        if display:
            self.refresh_view()
            self._show_position()

    def _apply(self, rec: Record) -> None:
        if rec.kind == "gpu":
            self.ingest(rec.value)
        elif rec.kind == "host":
            self.ingest_host(rec.value)
        elif rec.kind == "agents":
            self.ingest_agents(rec.value)
        elif rec.kind == "stacks":
            self.ingest_stacks(rec.value)
        elif rec.kind == "event" and rec.value[0] == "capture":
            self._show_recorded_capture(rec.value[1])
        recomputed = self.player.apply(rec)
        if rec.kind == "verdict" and self.player.recorded is not None:
            point, recorded = rec.value
            findings = recomputed.findings if recomputed is not None else ()
            self.verdict = recorded.as_verdict(findings)
            self.verdict_now = point.now
            if recomputed is not None and not same(recomputed, recorded) and not self.mismatch:
                got = recomputed.principal.bound if recomputed.principal else "none"
                was = recorded.principal.bound if recorded.principal else "none"
                self.mismatch = (
                    f"at {rec.t - self.start_t:.0f} s the verdict recomputed from the readings "
                    f"({got}) differs from the recorded one ({was}): the rules changed since "
                    "the recording; the recorded verdict is shown"
                )
                self._problems.append(self.mismatch)
                self._update_status()

    def _show_recorded_capture(self, data: dict[str, Any]) -> None:
        key = data.get("id")
        if type(key) is not int:
            return
        self.show_capture(
            CaptureView(
                key=key,
                kind=str(data.get("kind", "?")),
                pid=data["pid"] if type(data.get("pid")) is int else 0,
                status=str(data.get("status", "?")),
                folder=str(data.get("folder") or ""),
                reason=str(data.get("reason") or ""),
            )
        )

    def compute_verdict(self):  # type: ignore[override]
        """The recorded verdict (set as its evaluation is replayed), never a new one."""
        return self.verdict

    def seek(self, target: float) -> None:
        target = max(0.0, min(target, self.end_t - self.start_t))
        if target < self.at:
            self._reset(max(0.0, target - LEAD_S))
            self.captures.clear()
            self.at = 0.0
        playing = self.playing
        self._advance(target, display=True)
        self.playing = playing and self._next is not None  # a seek keeps play or pause
        self._show_position()

    # ---- keys ----

    def action_pause(self) -> None:
        self.playing = not self.playing and self._next is not None
        self._show_position()

    def action_seek(self, seconds: float) -> None:
        self.seek(self.at + float(seconds))

    def action_seek_to(self, seconds: float) -> None:
        self.seek(float(seconds))

    def action_seek_end(self) -> None:
        self.seek(self.end_t - self.start_t)

    def action_speed(self, step: int) -> None:
        i = SPEEDS.index(self.speed) + int(step)
        self.speed = SPEEDS[max(0, min(len(SPEEDS) - 1, i))]
        self._show_position()

    def unavailable_reason(self, action: str) -> str | None:
        if _live_only(action):
            return LIVE_ONLY
        if action == "speed_down" and self.speed == SPEEDS[0]:
            return f"already the slowest ({SPEEDS[0]:g}x)"
        if action == "speed_up" and self.speed == SPEEDS[-1]:
            return f"already the fastest ({SPEEDS[-1]:g}x)"
        return super().unavailable_reason(action)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if _live_only(action):
            return False  # not in the footer at all: the replay keys need the room
        return super().check_action(action, parameters)

    def _show_position(self) -> None:
        total = self.end_t - self.start_t
        state = "playing" if self.playing else "end" if self._next is None else "paused"
        text = (
            f"REPLAY {self.recording.path.name}  {_clock(self.at)} / {_clock(total)}  "
            f"{self.speed:g}x {state}"
        )
        if self.simulated_label:
            text += f"  (recorded on SIMULATED {self.simulated_label})"
        if self.recording.damage:
            text += f"  the file {self.recording.damage}"
        self.query_one(SimBanner).update(text)

    @property
    def simulated_label(self) -> str | None:
        sim = self.recording.session.get("simulated")
        return str(sim) if sim else None


def _live_only(action: str) -> bool:
    """Keys that act on a live process or the sampling rate."""
    return action in (
        "slower", "faster", "save_snapshot", "dump_stacks", "cancel_capture", "interrupt"
    ) or action.startswith("capture_")  # fmt: skip


def _label(recording: Recording) -> str:
    """The banner is always shown in replay (it says what is on screen)."""
    return f"REPLAY {recording.path.name}"


def _clock(seconds: float) -> str:
    s = int(max(0.0, seconds))
    if s >= 3600:
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def run_replay(recording: Recording, config: Config, speed: float = 1.0) -> int:
    app = ReplayApp(recording, config=config, speed=speed)
    app.run(mouse=config.mouse)
    return 0
