"""`gputop replay FILE`: the live screen over a recording, with pause, seek and speed keys.

The source and the clock are a ``Playback`` (gputop/record/playback.py): the recording's
readings go into a Session in their recorded order and timing (scaled by the speed), the
verdict is recomputed at the recorded points, and this screen draws the session's state, as the
live screen does. The verdict shown is the recorded one (what the live screen showed); the why
screen has the recomputed reasoning, and the status line says so if the two ever differ (a
recording made by a gputop whose rules have since changed).
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.css.query import NoMatches

from gputop.config import Config
from gputop.record.playback import SPEEDS, Playback
from gputop.record.reader import Recording
from gputop.ui.app import GputopApp, Target
from gputop.ui.layout import TARGET_PANES
from gputop.ui.panes.captures import CaptureView
from gputop.ui.widgets import SimBanner

TICK_S = 0.1
LIVE_ONLY = "not while replaying a recording"


class ReplayApp(GputopApp):
    """The live screen over a recording: a Playback, not samplers, feeds the session; keys seek."""

    BINDINGS = [
        Binding("left", "seek(-10)", "-10s", id="seek_back", priority=True),
        Binding("right", "seek(10)", "+10s", id="seek_forward", priority=True),
        Binding("shift+left", "seek(-60)", "-1min", id="seek_back_long", show=False),
        Binding("shift+right", "seek(60)", "+1min", id="seek_forward_long", show=False),
        Binding("left_square_bracket", "speed_down", "Slower", id="speed_down"),
        Binding("right_square_bracket", "speed_up", "Faster", id="speed_up"),
        Binding("home", "seek_to(0)", "Start", id="seek_start", show=False),
        Binding("end", "seek_end", "End", id="seek_end", show=False),
    ]
    KEY_BAR = [
        *GputopApp.KEY_BAR[:3],
        (("seek_back", "seek_forward"), "Seek"),
        (("speed_down", "speed_up"), "Speed"),
        *GputopApp.KEY_BAR[3:],
    ]
    KEY_HELP = {
        **GputopApp.KEY_HELP,
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

    def __init__(self, recording: Recording, *, config: Config | None = None,
                 speed: float = 1.0) -> None:  # fmt: skip
        session = recording.session
        pid = session.get("pid") if isinstance(session.get("pid"), int) else None
        command = session.get("command")
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        self.playback = Playback(recording, speed)
        self.recording = recording
        super().__init__(
            None,
            config=config,
            target=Target(pid, str(command or "?")) if pid is not None else None,
            simulated=_label(recording),
            start_sampler=False,
            session=self.playback.session,
            panes=TARGET_PANES if pid is not None else frozenset(),
        )
        interval = session.get("interval")
        if isinstance(interval, int | float) and 0.1 <= interval <= 60:
            self.interval = float(interval)
        self._mismatch_said = False

    # ---- playback ----

    @property
    def playing(self) -> bool:
        return self.playback.playing

    @property
    def speed(self) -> float:
        return self.playback.speed

    @property
    def at(self) -> float:
        return self.playback.at

    def on_mount(self) -> None:
        super().on_mount()
        self._timer = self.set_interval(TICK_S, self._tick)
        self._show_position()

    def on_unmount(self) -> None:
        self._timer.stop()  # no tick may draw into panes being torn down
        super().on_unmount()

    def _tick(self) -> None:
        if not self.playback.playing:
            return
        try:
            self._played(self.playback.tick(TICK_S))
        except NoMatches:  # a last tick while the app closes: its panes are already gone
            self.playback.playing = False

    def _played(self, captures: list[dict[str, Any]], restarted: bool = False) -> None:
        """Draw what the playback reached: its session (a new one after a seek back), the
        captures met, the position, and a mismatch once."""
        if restarted:
            self.session = self.playback.session
            self.capture_keys.clear()
        for data in captures:
            self._show_recorded_capture(data)
        self.refresh_view()
        if self.playback.mismatch and not self._mismatch_said:
            self._mismatch_said = True
            self.status.problems.append(self.playback.mismatch)
            self._update_status()
        self._show_position()

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
                trigger=str(data.get("trigger") or ""),
            )
        )

    def seek(self, target: float) -> None:
        restarted, captures = self.playback.seek(target)
        self._played(captures, restarted)

    # ---- keys ----

    def action_pause(self) -> None:
        self.playback.toggle()
        self._show_position()

    def action_seek(self, seconds: float) -> None:
        self.seek(self.playback.at + float(seconds))

    def action_seek_to(self, seconds: float) -> None:
        self.seek(float(seconds))

    def action_seek_end(self) -> None:
        self.seek(self.playback.total)

    def action_speed_down(self) -> None:
        self.playback.change_speed(-1)
        self._show_position()

    def action_speed_up(self) -> None:
        self.playback.change_speed(1)
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
        p = self.playback
        text = (
            f"REPLAY {self.recording.path.name}  {_clock(p.at)} / {_clock(p.total)}  "
            f"{p.speed:g}x {p.status}"
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
