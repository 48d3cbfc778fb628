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

from gputop.record import fileformat
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
    session = Session(gpu.devices, Sinks([rec]), evaluate_each=False,
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
    p = app.verdict.principal if app.verdict else None
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
        while app.playing:
            await pilot.pause(0.05)
        assert app.at == pytest.approx(app.playback.total)
        assert "end" in str(app.query_one("#sim-banner").render())
    assert seen == [bound for _, bound in expected.changes]
    assert app.playback.mismatch is None


async def test_pause_seek_and_speed_keys(recording):
    app = ReplayApp(recording, speed=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space")  # pause
        at = app.at
        await pilot.pause(0.3)
        assert app.at == at and not app.playing
        await pilot.press("right", "right")
        assert app.at == pytest.approx(at + 20, abs=0.2)
        assert app.verdict is not None and app.latest
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
        await pilot.press("space")
        assert app.playing
        await pilot.pause(0.5)
        assert app.at > 0.5
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
        assert [(v.kind, v.status, v.folder) for v in app.captures.values()] == [
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
        while app.playing:
            await pilot.pause(0.05)
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
