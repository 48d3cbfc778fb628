"""The recorder: a sink that appends the session to a file (format: fileformat.py, events.py).

Records are buffered and written once a second as one frame (a zlib sync flush: on disk, the
frame is readable even if gputop is killed the next instant). Each minute the recorder writes
the minute's summary; every 10 minutes it starts a new compressed segment (where a reader can
begin: step histories and stack frames are written again). The file is private (0600), never
overwritten, and a write that fails (disk full) stops the recording with one line saying so;
the monitor goes on.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import queue
import socket
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gputop import __version__
from gputop.diagnose import EvalPoint, Verdict
from gputop.model.gpu import DeviceInfo, GpuSample
from gputop.model.host import HostSample
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample
from gputop.record import events as ev
from gputop.record.codec import Schema
from gputop.record.fileformat import DATA, FORMAT_VERSION, HEADER, MAGIC, NEW_STREAM, SUMMARY, pack
from gputop.record.summary import Accumulator
from gputop.sinks import SinkError

FLUSH_S = 1.0
SUMMARY_S = 60.0
SEGMENT_S = 600.0
"""A new compressed stream (a place a reader can start, with every step history and stack
frame written again) every 10 minutes; summaries every minute inside it."""
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=True)


class RecordError(SinkError):
    """A recording to write (--record, record -o) cannot be created: the path exists or cannot
    be made (one line: what and what to do). Reading one is ``RecordingError``."""

    when = "a recording to write whose path exists or cannot be created"


def create(path: Path) -> int:
    """A new private file; an existing one is never overwritten."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
    except FileExistsError:
        raise RecordError(
            f"{path} exists: gputop never overwrites a recording; give another name"
        ) from None
    except OSError as e:
        raise RecordError(f"cannot create {path}: {e.strerror}") from None


class Recorder:
    """Implements gputop.sinks.Sink."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self.problem: str | None = None
        self._fd = create(self.path)
        self._disk = _Disk(self._fd)
        self._clock = clock
        self._schema = Schema()
        self._agents = ev.AgentsEncoder(self._schema)
        self._acc = Accumulator()
        self._lines: list[str] = []
        self._first_t: float | None = None
        self._flushed_at = clock()
        self._segment_at: float | None = None
        self._summary_at: float | None = None
        self._stream: Any = None
        self._last_verdict: str | None = None
        self.bytes_written = 0

    # ---- the sink ----

    def start(self, devices: Sequence[DeviceInfo], meta: dict[str, Any]) -> None:
        header: dict[str, Any] = {
            "format": "gputop.recording",
            "version": FORMAT_VERSION,
            "gputop_version": __version__,
            "created_wall": time.time(),
            "t0": self._clock(),
            "hostname": socket.gethostname(),
            "session": meta,
            "fields": self._schema.header(),
            "devices": [self._schema.encode(d) for d in devices],
        }
        payload = _JSON.encode(header).encode()
        self._write(MAGIC + pack(HEADER, 0, header["t0"], payload))
        self._disk.drain()  # once, at the start: a file without its header must not stay
        if self._disk.error is not None:
            self._abandon(self._disk.error)

    def gpu(self, samples: Sequence[GpuSample]) -> None:
        if samples:
            self._acc.gpu(samples)
            self._add(samples[0].t, ["g", [self._schema.encode(s) for s in samples]])

    def host(self, sample: HostSample) -> None:
        exited = self._acc.exited
        self._acc.host(sample)
        self._add(sample.t, ["h", self._schema.encode(sample)])
        if self._acc.exited and not exited:
            data = {"pid": sample.pid, "exit_code": sample.exit_code}
            self._add(sample.t, ["e", sample.t, sample.wall, "target-exit", data])

    def agents(self, sample: AgentsSample) -> None:
        self._acc.agents(sample)
        self._add(sample.t, self._agents.encode(sample))

    def stacks(self, sample: StacksSample) -> None:
        rec = ["s", self._schema.encode(sample)]
        frames = self._schema.take_new_frames()
        if frames:  # no tick in between: a new segment must not split the table from its use
            self._lines.append(_JSON.encode(["F", frames]))
        self._add(sample.t, rec)

    def verdict(self, point: EvalPoint, verdict: Verdict) -> None:
        self._acc.verdict(point, verdict)
        body = _JSON.encode(ev.encode_verdict(ev.RecordedVerdict.of(verdict), self._schema))
        same = body == self._last_verdict
        self._last_verdict = body
        self._lines.append(
            _JSON.encode(["v", ev.encode_point(point), 0]) if same else
            f'["v",{_JSON.encode(ev.encode_point(point))},{body}]'
        )  # fmt: skip
        self._tick(point.now)

    def event(self, t: float, wall: float, kind: str, data: dict[str, Any]) -> None:
        self._acc.event(t, wall, kind, data)
        self._add(t, ["e", t, wall, kind, data])

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            self._flush(summary=True, segment=True)
        finally:
            self._disk.close()
            if self._disk.written == 0:  # never started (NVML or the job failed first)
                _remove_own(self.path, self._fd)
            self._close_fd()
            self._check_disk()

    def _close_fd(self) -> None:
        if not self._disk.busy:
            os.close(self._fd)
        self._fd = -1

    def _abandon(self, e: OSError) -> None:
        """The header could not be written: the file holds nothing readable and would only
        block the name, so it goes, and the recording stops in one line."""
        self._disk.close()
        _remove_own(self.path, self._fd)
        self._close_fd()
        self.bytes_written = 0
        why = "the disk is full" if e.errno == errno.ENOSPC else e.strerror
        self.problem = (
            f"cannot record to {self.path}: {why}; nothing was recorded and the file was "
            "removed (free some space or give -o a path on another disk)"
        )

    def drain(self) -> None:
        """Wait until every frame handed over so far is on disk (or failed)."""
        self._disk.drain()
        self._check_disk()

    # ---- writing ----

    def _add(self, t: float, record: list[Any]) -> None:
        self._lines.append(_JSON.encode(record))
        self._tick(t)

    def _tick(self, t: float) -> None:
        if self._first_t is None:
            self._first_t = t
        if self._segment_at is None:
            self._segment_at = t
        if self._summary_at is None:
            self._summary_at = t
        if t - self._segment_at >= SEGMENT_S:
            self._flush(summary=True, segment=True)
        elif t - self._summary_at >= SUMMARY_S:
            self._flush(summary=True)
        elif self._clock() - self._flushed_at >= FLUSH_S:
            self._flush()

    def _flush(self, summary: bool = False, segment: bool = False) -> None:
        if self._fd < 0:
            return
        self._flushed_at = self._clock()
        out = b""
        if self._lines:
            flags = 0
            if self._stream is None:
                self._stream = zlib.compressobj(6)
                flags = NEW_STREAM
            data = ("\n".join(self._lines) + "\n").encode()
            payload = self._stream.compress(data) + self._stream.flush(zlib.Z_SYNC_FLUSH)
            out += pack(DATA, flags, self._first_t or 0.0, payload)
            self._lines = []
            self._first_t = None
        if summary:
            part = self._acc.take()
            if part["t0"] is not None or out:
                body = zlib.compress(_JSON.encode(part).encode(), 6)
                out += pack(SUMMARY, 0, part["t0"] or 0.0, body)
            self._summary_at = None
        if segment:  # the next record starts a new stream: readers can begin there
            self._stream = None
            self._segment_at = None
            self._agents.reset()
            self._schema.forget_frames()
            self._last_verdict = None
        if out:
            self._write(out)

    def _write(self, data: bytes) -> None:
        """Hand a frame to the disk thread: the monitor's thread never waits on a write."""
        self._check_disk()
        if self._fd >= 0:
            self._disk.put(data)

    def _check_disk(self) -> None:
        """A write that failed on the disk thread stops the recording, in one line."""
        self.bytes_written = self._disk.written
        e = self._disk.error
        if e is None or self.problem:
            return
        if self._fd >= 0:
            self._disk.close()
            self._close_fd()
        why = "the disk is full" if e.errno == errno.ENOSPC else e.strerror
        self.problem = (
            f"recording stopped: {why} writing {self.path}; it is readable up to the "
            "last second written"
        )


def _remove_own(path: Path, fd: int) -> None:
    """Remove ``path`` if it is still the file open as ``fd`` (never one put in its place)."""
    with contextlib.suppress(OSError):
        mine, there = os.fstat(fd), os.lstat(path)
        if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
            path.unlink()


class _Disk:
    """Writes frames in order on its own thread: a slow or network disk (a home directory on
    NFS) must not stall the screen. Frames are small and once a second; a SIGKILL loses at
    most the one being written, which a reader sees as a cut last frame."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self.error: OSError | None = None
        self.written = 0
        self._thread = threading.Thread(target=self._run, name="gputop-recorder", daemon=True)
        self._thread.start()

    def put(self, data: bytes) -> None:
        self._queue.put(data)

    def drain(self) -> None:
        self._queue.join()

    def close(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout)

    @property
    def busy(self) -> bool:
        """Still writing after ``close`` gave up waiting (a disk that hangs): its descriptor
        must stay open, or a later file given the same number would get its frames."""
        return self._thread.is_alive()

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            try:
                if data is None:
                    return
                if self.error is None:
                    self._write_all(data)
            finally:
                self._queue.task_done()

    def _write_all(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
                self.written += n
        except OSError as e:
            self.error = e
