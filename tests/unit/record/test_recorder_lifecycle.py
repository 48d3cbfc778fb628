"""The recorder's edges a user meets: a session that never started leaves no file, a full disk
stops the recording in one line while the monitor goes on, and what was written stays
readable."""

from __future__ import annotations

import errno
import os

from builders import device

from gputop.model.gpu import GpuSample
from gputop.record.reader import open_recording
from gputop.record.writer import Recorder
from gputop.sinks import Sinks


def test_a_recorder_that_never_started_leaves_no_file(tmp_path):
    path = tmp_path / "never.rec"
    Recorder(path).close()
    assert not path.exists()


def test_a_full_disk_stops_the_recording_in_one_line_and_keeps_what_was_written(
    tmp_path, monkeypatch
):
    clock = [100.0]
    path = tmp_path / "full.rec"
    rec = Recorder(path, clock=lambda: clock[0])
    sinks = Sinks([rec])
    sinks.start((device(0),), {"mode": "monitor"})
    for i in range(5):
        clock[0] += 1.5  # every reading is flushed: over a second apart
        sinks.gpu([GpuSample(0, clock[0], 1.7e9 + clock[0], power_w=100.0 + i)])
    real_write = os.write

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    rec.drain()
    monkeypatch.setattr(os, "write", full)
    clock[0] += 1.5
    sinks.gpu([GpuSample(0, clock[0], 1.7e9 + clock[0], power_w=200.0)])  # must not raise
    rec.drain()  # the disk thread met the full disk
    monkeypatch.setattr(os, "write", real_write)
    clock[0] += 1.5
    sinks.gpu([GpuSample(0, clock[0], 1.7e9 + clock[0], power_w=300.0)])  # says it, once
    assert sinks.problems == [
        f"recording stopped: the disk is full writing {path}; it is readable up to the last "
        "second written"
    ]
    assert not sinks.sinks  # dropped: later readings go nowhere, without errors
    sinks.gpu([GpuSample(0, clock[0] + 2, 1.7e9, power_w=1.0)])
    sinks.close()
    recording = open_recording(path)
    powers = [r.value[0].power_w for r in recording.records() if r.kind == "gpu"]
    assert powers == [100.0, 101.0, 102.0, 103.0, 104.0]
    assert recording.damage is None


def test_the_monitor_thread_never_writes_the_file(tmp_path, monkeypatch):
    """Frames are written by the recorder's own thread: a slow disk cannot stall the screen."""
    import threading

    writers = set()
    real_write = os.write

    def spy(fd, data):
        writers.add(threading.current_thread().name)
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", spy)
    clock = [100.0]
    rec = Recorder(tmp_path / "s.rec", clock=lambda: clock[0])
    rec.start((device(0),), {"mode": "monitor"})
    for i in range(3):
        clock[0] += 1.5
        rec.gpu([GpuSample(0, clock[0], 1.7e9 + clock[0], power_w=float(i))])
    rec.close()
    assert writers == {"gputop-recorder"}
    assert len([r for r in open_recording(tmp_path / "s.rec").records() if r.kind == "gpu"]) == 3


def test_a_disk_full_before_the_header_removes_the_file_and_says_so(tmp_path, monkeypatch):
    """Issue 17 item 8: the header failed, a 0-byte file stayed and blocked the name."""
    path = tmp_path / "full.rec"
    real_write = os.write

    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    rec = Recorder(path)
    sinks = Sinks([rec])
    sinks.start((device(0),), {"mode": "record"})
    assert sinks.problems == [
        f"cannot record to {path}: the disk is full; nothing was recorded and the file was "
        "removed (free some space or give -o a path on another disk)"
    ]
    assert not path.exists() and not sinks.sinks
    sinks.close()
    monkeypatch.setattr(os, "write", real_write)
    again = Recorder(path)  # the name is free for the next try
    again.start((device(0),), {"mode": "record"})
    again.close()
    assert open_recording(path).devices == (device(0),)


def test_a_file_put_in_place_of_the_recording_is_never_removed(tmp_path):
    """A recording that never started removes its file, only if it is still its own."""
    path = tmp_path / "never.rec"
    rec = Recorder(path)
    path.unlink()
    path.write_text("someone else's")
    rec.close()
    assert path.read_text() == "someone else's"
