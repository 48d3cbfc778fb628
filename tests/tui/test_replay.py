"""`gputop replay`: the live screen over a recording. The recording is made here through the
real Recorder from deterministic readings (a seeded simulated board on a frozen clock, a
hand-built host, agents and stacks) fed through the live monitor's Session, so the screen is
the same on every run."""

from __future__ import annotations

import dataclasses
import json
import zlib
from pathlib import Path

import pytest
from conftest import WALL0, agents_sample, host_sample, record, stacks_window
from tests_support import until_drawn

from gputop.record import fileformat
from gputop.record.playback import SPEEDS
from gputop.record.reader import open_recording
from gputop.record.replay import check
from gputop.record.writer import Recorder
from gputop.session import Session
from gputop.sinks import Sinks
from gputop.ui.replay_app import ReplayApp

SIZES = {"compact": (80, 24), "wide": (160, 48)}
STEP_S = 1.0


def make_recording(path: Path, ticks: int = 90) -> Path:
    """``ticks`` seconds of a starved job: GPU readings, host, agents, stacks, a capture."""
    gpu = record("h100x2", "starved", ticks=ticks, step=STEP_S)
    host = host_sample("starved")
    agents = agents_sample()
    stacks = stacks_window()
    clock = [0.0]
    rec = Recorder(path, clock=lambda: clock[0])
    session = Session(gpu.devices, sinks=Sinks([rec]), evaluate_each=False,
                      clock=lambda: clock[0], wall=lambda: WALL0 + clock[0])  # fmt: skip
    session.start({"mode": "monitor", "pid": host.pid, "command": "python train.py",
                   "interval": 1.0})  # fmt: skip
    for i, samples in enumerate(gpu.history):
        now = clock[0] = samples[0].t
        session.gpu(samples)
        session.host(dataclasses.replace(host, t=now, wall=WALL0 + now))
        session.agents(dataclasses.replace(agents, t=now, wall=WALL0 + now))
        session.stacks(dataclasses.replace(stacks[i % len(stacks)], t=now, wall=WALL0 + now))
        session.evaluate()  # once a tick, at the point the readings define
        if i == 30:
            data = {"id": 1, "kind": "pyspy-flame", "pid": host.pid, "status": "ok",
                    "folder": "/captures/flame", "reason": ""}  # fmt: skip
            session.event("capture", data)
    session.close()
    return path


@pytest.fixture
def recording(tmp_path):
    return open_recording(make_recording(tmp_path / "session.rec"))


def shown(app: ReplayApp) -> str | None:
    p = app.session.state.verdict.principal if app.session.state.verdict else None
    return p.bound if p else None


async def test_replay_plays_the_recorded_verdicts_in_order(recording):
    expected = check(recording)
    assert expected.ok and expected.changes, expected.text()
    app = ReplayApp(recording, speed=64.0)
    seen: list[str | None] = []
    player = app.playback.player
    apply = player.apply

    def spy(rec):
        out = apply(rec)
        if rec.kind == "verdict" and (not seen or seen[-1] != shown(app)):
            seen.append(shown(app))
        return out

    player.apply = spy  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await until_drawn(pilot, lambda: not app.playing, timeout=60, what="the playback's end")
        assert app.at == pytest.approx(app.playback.total)
        assert "end" in str(app.query_one("#sim-banner").render())
    assert seen == [bound for _, bound in expected.changes]
    assert app.playback.mismatch is None


async def test_pause_seek_and_speed_keys(recording):
    app = ReplayApp(recording, speed=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space")  # pause
        at = app.at
        await pilot.pause(0.3)  # pacing: three ticks (0.1 s) of the paused playback
        assert app.at == at and not app.playing
        await pilot.press("right", "right")
        assert app.at == pytest.approx(at + 20, abs=0.2)
        assert app.session.state.verdict is not None and app.session.state.gpus
        await pilot.press("left")
        assert app.at == pytest.approx(at + 10, abs=0.2)
        await pilot.press("end")
        assert app.at == pytest.approx(app.playback.total)
        await pilot.press("home")
        assert app.at == 0.0
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert app.speed == 4.0
        await pilot.press("left_square_bracket")
        assert app.speed == 2.0
        await pilot.press(*["left_square_bracket"] * 4)  # 1, 0.5, 0.25, and no slower
        assert app.speed == SPEEDS[0]
        said = str(app.query_one("#status").render())  # the last press, refused in words
        assert f"already the slowest ({SPEEDS[0]:g}x)" in said, said
        assert app.check_action("speed_down", ()) is None  # dimmed in the key bar
        await pilot.press(*["right_square_bracket"] * 3)
        assert app.speed == 2.0 and app.check_action("speed_down", ()) is True
        await pilot.press("space")
        assert app.playing
        await until_drawn(pilot, lambda: app.at > 0.5, what="playback moving at 2x")
        banner = str(app.query_one("#sim-banner").render())
        assert "REPLAY session.rec" in banner and "2x" in banner
        # keys that act on a live process are not offered
        assert app.check_action("capture_flame", ()) is False
        assert app.unavailable_reason("interrupt") == "not while replaying a recording"


async def test_a_recorded_capture_appears_in_the_captures_pane(recording):
    app = ReplayApp(recording, speed=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space")
        app.seek(40)
        await pilot.pause()
        assert [(v.kind, v.status, v.folder) for v in app.capture_keys.views.values()] == [
            ("pyspy-flame", "ok", "/captures/flame")
        ]


def _tamper(path: Path) -> None:
    """Rewrite every recorded verdict's principal bound (as a gputop with other rules would
    have recorded it), keeping the file's framing valid."""
    raw = path.read_bytes()
    out, offset = bytearray(raw[: len(fileformat.MAGIC)]), len(fileformat.MAGIC)
    stream = None
    comp = None
    while offset < len(raw):
        kind, flags, length, t, _, _ = fileformat.FRAME.unpack_from(raw, offset)
        payload = raw[offset + fileformat.FRAME.size : offset + fileformat.FRAME.size + length]
        offset += fileformat.FRAME.size + length
        if kind == fileformat.DATA:
            if flags & fileformat.NEW_STREAM:
                stream, comp = zlib.decompressobj(), zlib.compressobj(6)
            lines = []
            for line in stream.decompress(payload).decode().splitlines():
                rec = json.loads(line)
                if rec[0] == "v" and rec[2] and rec[2][0]:
                    rec[2][0][0] = "memory-bandwidth"
                lines.append(json.dumps(rec))
            data = ("\n".join(lines) + "\n").encode()
            payload = comp.compress(data) + comp.flush(zlib.Z_SYNC_FLUSH)
        out += fileformat.pack(kind, flags, t, payload)
    path.write_bytes(bytes(out))


async def test_a_verdict_that_recomputes_differently_is_said(tmp_path):
    path = make_recording(tmp_path / "old.rec", ticks=20)
    _tamper(path)
    recording = open_recording(path)
    assert not check(recording).ok
    app = ReplayApp(recording, speed=64.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_drawn(pilot, lambda: not app.playing, timeout=60, what="the playback's end")
        assert shown(app) == "memory-bandwidth"  # the recorded verdict is what is shown
        assert app.playback.mismatch and "differs from the recorded one" in app.playback.mismatch
        assert "differs from the recorded one" in str(app.query_one("#status").render())


@pytest.mark.parametrize("size", SIZES)
def test_replay_screen(snap_compare, tmp_path, size):
    recording = open_recording(make_recording(tmp_path / "session.rec", ticks=60))

    async def at_45s(pilot):
        await pilot.press("space")
        app.seek(45)
        await pilot.pause()

    app = ReplayApp(recording, speed=1.0)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=at_45s)


KEEP = {"index", "t", "wall", "pid", "ppid", "start_ticks", "tid", "mig_index", "rank",
        "local_rank", "world_size"}  # fmt: skip
"""Identities and clocks: the reader checks those; every measurement may be any number."""


def far_off(v, sign: int):
    """``v`` with every measurement inside it as far off as a file can hold (1e308, 2**63)."""
    if dataclasses.is_dataclass(v):
        changes = {f.name: far_off(getattr(v, f.name), sign) for f in dataclasses.fields(v)
                   if f.name not in KEEP}  # fmt: skip
        return dataclasses.replace(v, **changes)
    if isinstance(v, tuple):
        return tuple(far_off(x, sign) for x in v)
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return sign * 2**63
    if isinstance(v, float):
        return sign * 1e308
    return v


def make_far_off_recording(path: Path, ticks: int = 40) -> Path:
    """A starved job whose every other tick reads 1e308 / -1e308 / 2**63 everywhere."""
    gpu = record("h100x2", "starved", ticks=ticks, step=STEP_S)
    host, agents, stacks = host_sample("starved"), agents_sample(), stacks_window()
    clock = [0.0]
    rec = Recorder(path, clock=lambda: clock[0])
    session = Session(gpu.devices, sinks=Sinks([rec]), evaluate_each=False,
                      clock=lambda: clock[0], wall=lambda: WALL0 + clock[0])  # fmt: skip
    session.start({"mode": "monitor", "pid": host.pid, "command": "python train.py"})
    for i, samples in enumerate(gpu.history):
        now = clock[0] = samples[0].t
        sign = (1, -1)[i % 4 // 2]
        odd = i % 2 == 1
        session.gpu([far_off(s, sign) for s in samples] if odd else samples)
        h = dataclasses.replace(host, t=now, wall=WALL0 + now)
        session.host(far_off(h, sign) if odd else h)
        a = dataclasses.replace(agents, t=now, wall=WALL0 + now)
        session.agents(far_off(a, sign) if odd else a)
        session.stacks(dataclasses.replace(stacks[i % len(stacks)], t=now, wall=WALL0 + now))
        session.evaluate()
    session.close()
    return path


@pytest.mark.parametrize("size", SIZES)
async def test_a_recording_of_numbers_no_board_gives_replays_every_screen(tmp_path, size):
    """Replay draws what a crafted file holds: every pane, the GPU detail with its charts, the
    why screen, at both sizes, to the end, without an exception."""
    recording = open_recording(make_far_off_recording(tmp_path / "far.rec"))
    assert recording.damage is None
    app = ReplayApp(recording, speed=64.0)
    async with app.run_test(size=SIZES[size]) as pilot:
        await pilot.press("enter")  # the GPU detail: charts of the history
        await until_drawn(pilot, lambda: not app.playing, timeout=60, what="the playback's end")
        await pilot.press("escape", "v")  # why: every rule with its numbers
        await pilot.pause()
        await pilot.press("escape", "j", "enter")
        await pilot.pause()
        assert app.at == pytest.approx(app.playback.total)
