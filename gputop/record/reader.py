"""Reading a session file: the header, then the records in order, or only the summaries.

Total over any input: a file that is not a recording, from a newer format, cut short or
damaged gives a ``RecordingError`` (nothing usable) or, once the header is read, stops at the
damage and says where in ``damage`` while keeping everything before it. Bounded on any input:
a frame inflates to at most MAX_INFLATED bytes, read a MiB at a time; a record is at most
MAX_LINE bytes and MAX_DEPTH deep; a reading's time is a number no earlier than the one before
it from the same source (what the session's timeline needs). A crafted file (a zlib bomb, deep
nesting, a checksummed record of any shape) is damage at that point, never a traceback.
"""

from __future__ import annotations

import itertools
import json
import math
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputop.model.gpu import DeviceInfo, GpuSample
from gputop.model.host import HostSample
from gputop.model.stacks import StacksSample
from gputop.record import events as ev
from gputop.record.codec import CodecError, Decoder, Schema
from gputop.record.fileformat import (
    CUT,
    DATA,
    FORMAT_VERSION,
    HEADER,
    NEW_STREAM,
    SUMMARY,
    RecordingError,
    Scan,
    frames,
)
from gputop.record.summary import Accumulator
from gputop.record.summary_shape import SUMMARY_SHAPE, finite

__all__ = ["Record", "Recording", "RecordingError", "open_recording"]

MAX_INFLATED = 64 << 20
"""Bytes one data frame may inflate to: a second of records is far less (a 370 KB zlib bomb
inflated to 370 MB and took `gputop report` to 760 MB)."""
MAX_SUMMARY = 16 << 20
"""Bytes one summary may inflate to (a minute's summary is kilobytes)."""
MAX_HEADER = 1 << 20
MAX_LINE = 8 << 20
"""Bytes of one record (an agents record with every step of 64 ranks is under a MiB)."""
MAX_DEPTH = 32
"""Nesting of one record: gputop writes under ten levels; a deeper one is damage before
anything recurses over it."""
_CHUNK = 1 << 20
_BRACKETS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[{]}")))


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record: ``kind`` is gpu, host, agents, stacks, verdict or event."""

    kind: str
    t: float
    value: Any
    """GpuSample list, HostSample, AgentsSample, StacksSample, (EvalPoint, RecordedVerdict),
    or (kind, data, wall) for an event."""


@dataclass
class Recording:
    """An opened session file: its header checked, its records and summaries read on demand,
    and where it is damaged, if it is."""

    path: Path
    header: dict[str, Any]
    devices: tuple[DeviceInfo, ...]
    t0: float
    damage: str | None = None
    """Why reading stopped before the end of the file (None: it did not)."""
    _schema: Schema = field(default_factory=Schema)
    _starts: list[tuple[float, int]] | None = None

    @property
    def bad(self) -> bool:
        """Damaged inside (a checksum, a record that cannot be, a bomb): the commands exit 1.
        A file cut at its end (the recorder killed or out of disk) is not: it was written
        right up to where it stops."""
        return self.damage is not None and not self.damage.startswith(CUT)

    @property
    def session(self) -> dict[str, Any]:
        s = self.header.get("session")
        return s if isinstance(s, dict) else {}

    def records(self, start: float | None = None, from_offset: int | None = None
                ) -> Iterator[Record]:  # fmt: skip
        """Every record in order; with ``start``, from the segment that holds ``start``; with
        ``from_offset``, those of the frames from that offset on (decoded from their segment's
        start, which the stream and the step deltas need)."""
        scan = Scan()
        dec = self._schema.decoder(self.header["fields"])
        agents = ev.AgentsDecoder(dec)
        stream: Any = None
        last_verdict: ev.RecordedVerdict | None = None
        clock = _Clock()
        begin: int | None = None
        if start is not None or from_offset is not None:
            starts = self.segment_starts()
            if from_offset is not None:
                begin = max((o for _, o in starts if o <= from_offset), default=None)
            elif start is not None:
                begin = max((o for t, o in starts if t <= start), default=None)
        with self.path.open("rb") as f:
            for fr in frames(f, str(self.path), scan, start_offset=begin):
                if fr.kind != DATA:
                    continue
                if fr.flags & NEW_STREAM:
                    stream = zlib.decompressobj()
                    dec.frames.clear()
                    agents.reset()
                    last_verdict = None
                if stream is None:  # from ``begin`` on, every segment is read from its start
                    self.damage = f"damaged at byte {fr.offset:,} (data outside a segment)"
                    return
                try:
                    for line in _frame_lines(stream, fr.payload):
                        rec, last_verdict = _decode(_json(line), dec, agents, last_verdict)
                        if rec is None:
                            continue
                        clock.check(rec)
                        if from_offset is None or fr.offset >= from_offset:
                            yield rec
                except (zlib.error, UnicodeDecodeError):
                    self.damage = f"damaged at byte {fr.offset:,} (does not decompress)"
                    return
                except (ValueError, CodecError, TypeError, OverflowError) as e:
                    self.damage = f"damaged at byte {fr.offset:,} ({e})"
                    return
        self.damage = scan.damage

    def span(self) -> tuple[float, float]:
        """(first, last) reading time: the last summary's end, or the last data frame's start
        (within a second of the end) for a recording that did not end cleanly."""
        scan = Scan()
        first = last = None
        with self.path.open("rb") as f:
            for fr in frames(f, str(self.path), scan, skip_data=True):
                if fr.kind == DATA:
                    first = fr.t if first is None else first
                    last = fr.t if last is None else max(last, fr.t)
                elif fr.kind == SUMMARY:
                    part = _summary(fr.payload)
                    if part is not None and part.get("t1") is not None:
                        last = part["t1"] if last is None else max(last, part["t1"])
        if first is None:
            return self.t0, self.t0
        return first, max(first, last if last is not None else first)

    def segment_starts(self) -> list[tuple[float, int]]:
        """(time, offset) of every segment start: where a reader can begin. Cached: a
        recording still being written gains segments, never loses them."""
        if self._starts is None or not self._starts:
            scan = Scan()
            with self.path.open("rb") as f:
                self._starts = [
                    (fr.t, fr.offset)
                    for fr in frames(f, str(self.path), scan, skip_data=True)
                    if fr.kind == DATA and fr.flags & NEW_STREAM
                ]
        return self._starts

    def summaries(self) -> list[dict[str, Any]]:
        """Every minute's summary; the minutes after the last one (a recording that did not
        end cleanly) are summarised from their records, the same way the recorder does."""
        scan = Scan()
        parts: list[dict[str, Any]] = []
        tail_from = None
        starts: list[tuple[float, int]] = []
        with self.path.open("rb") as f:
            for fr in frames(f, str(self.path), scan, skip_data=True):
                if fr.kind == DATA and fr.flags & NEW_STREAM:
                    starts.append((fr.t, fr.offset))
                if fr.kind == SUMMARY:
                    part = _summary(fr.payload)
                    if part is None:
                        self.damage = f"damaged at byte {fr.offset:,} (a summary)"
                        return parts
                    parts.append(part)
                    tail_from = None
                elif fr.kind == DATA and tail_from is None:
                    tail_from = fr.offset
        self.damage = scan.damage
        self._starts = starts
        if tail_from is not None:  # the minutes after the last summary: from their records
            acc = Accumulator(parts[-1]["carry"] if parts else None)
            for rec in self.records(from_offset=tail_from):
                _feed(acc, rec)
            part = acc.take()
            if part["t0"] is not None:
                parts.append(part)
        return parts


def _frame_lines(stream: Any, payload: bytes) -> Iterator[bytes]:
    """The records of one data frame, inflated a MiB at a time: memory is one record and one
    chunk, whatever the payload inflates to (CodecError past MAX_INFLATED or MAX_LINE)."""
    buf = bytearray()
    total = 0
    data = payload
    while True:
        chunk = stream.decompress(data, _CHUNK)
        data = stream.unconsumed_tail
        total += len(chunk)
        if total > MAX_INFLATED:
            raise CodecError(f"a frame inflates past {MAX_INFLATED >> 20} MiB")
        buf += chunk
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            yield bytes(buf[start:nl])
            start = nl + 1
        del buf[:start]
        if len(buf) > MAX_LINE:
            raise CodecError(f"a record longer than {MAX_LINE >> 20} MiB")
        if not data and len(chunk) < _CHUNK:
            break
    if buf.strip():
        yield bytes(buf)


def _json(raw: bytes) -> Any:
    """One record's JSON, nested at most MAX_DEPTH deep (CodecError, or ValueError)."""
    text = raw.decode()
    if not text.strip():
        raise CodecError("an empty record")
    try:
        value = json.loads(text)
    except RecursionError:
        raise CodecError("a record nested deeper than any gputop writes") from None
    if _upper_depth(raw) > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise CodecError("a record nested deeper than any gputop writes")
    return value


def _upper_depth(raw: bytes) -> int:
    """Nesting of ``raw`` counting brackets inside strings too (at least the real one): C
    speed, so only a line that may be too deep is walked."""
    steps = array("b", raw.translate(_BRACKETS, _NOT_BRACKETS))
    return max(itertools.accumulate(steps), default=0)


def _depth(value: Any) -> int:
    """Nesting of a JSON value, without recursion."""
    deepest = 0
    todo = [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, list | dict):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:
                todo.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


class _Clock:
    """Each source's readings go forward in time (the live session's timeline refused a step
    back before the recorder saw it, and replay's refuses it too): a time that is no number, or
    earlier than the one before it from the same source, is damage."""

    def __init__(self) -> None:
        self.last: dict[Any, float] = {}

    def check(self, rec: Record) -> None:
        if rec.kind == "gpu":
            for s in rec.value:
                self._at(s.key, s.t)
        elif rec.kind in ("host", "agents", "stacks"):
            self._at(rec.value.key, rec.value.t)
        elif rec.kind == "verdict":  # a point may go back (its window ends are what it is)
            point = rec.value[0]
            ends = [e[1] for e in (point.host, point.stacks) if e is not None]
            if not all(finite(t) for t in (point.now, *ends)):
                raise CodecError("an evaluation at a time no clock gives")
        elif not finite(rec.t):
            raise CodecError("an event at a time no clock gives")

    def _at(self, key: Any, t: Any) -> None:
        if not finite(t):
            raise CodecError("a reading at a time no clock gives")
        if t < self.last.get(key, -math.inf):
            raise CodecError(f"the time of {key[0]} readings goes back")
        self.last[key] = t


def _summary(payload: bytes) -> dict[str, Any] | None:
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(payload, MAX_SUMMARY)
        if inflate.unconsumed_tail or len(raw) >= MAX_SUMMARY:
            return None  # larger than any summary gputop writes
        part = _json(raw)
    except (zlib.error, ValueError, CodecError):
        return None
    if not SUMMARY_SHAPE(part):
        return None
    return part


def _feed(acc: Accumulator, rec: Record) -> None:
    if rec.kind == "gpu":
        acc.gpu(rec.value)
    elif rec.kind == "host":
        acc.host(rec.value)
    elif rec.kind == "agents":
        acc.agents(rec.value)
    elif rec.kind == "verdict":
        point, recorded = rec.value
        acc.verdict(point, recorded.as_verdict())
    elif rec.kind == "event" and rec.value[0] != "target-exit":  # the host reading makes it
        kind, data, wall = rec.value
        acc.event(rec.t, wall, kind, data)


def _decode(
    raw: Any, dec: Decoder, agents: ev.AgentsDecoder, last: ev.RecordedVerdict | None
) -> tuple[Record | None, ev.RecordedVerdict | None]:
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
        raise CodecError("a record has the wrong shape")
    tag = raw[0]
    if tag == "g" and len(raw) == 2 and isinstance(raw[1], list):
        samples = [dec.record(GpuSample, s) for s in raw[1]]
        return (Record("gpu", samples[0].t, samples) if samples else None), last
    if tag == "h" and len(raw) == 2:
        h = dec.record(HostSample, raw[1])
        return Record("host", h.t, h), last
    if tag == "a":
        a = agents.decode(raw)
        return Record("agents", a.t, a), last
    if tag == "F" and len(raw) == 2:
        dec.define_frames(raw[1])
        return None, last
    if tag == "s" and len(raw) == 2:
        s = dec.record(StacksSample, raw[1])
        return Record("stacks", s.t, s), last
    if tag == "v" and len(raw) == 3:
        point = ev.decode_point(raw[1])
        if raw[2] == 0:
            if last is None:
                raise CodecError("a repeated verdict with none before it")
            recorded = last
        else:
            recorded = ev.decode_verdict(raw[2], dec)
        return Record("verdict", point.now, (point, recorded)), recorded
    if tag == "e" and len(raw) == 5 and isinstance(raw[3], str) and isinstance(raw[4], dict):
        if not isinstance(raw[1], int | float) or not isinstance(raw[2], int | float):
            raise CodecError("an event has the wrong shape")
        return Record("event", raw[1], (raw[3], raw[4], raw[2])), last
    if tag in ("g", "h", "a", "F", "s", "v", "e"):
        raise CodecError(f"a {tag!r} record has the wrong shape")
    return None, last  # a record type from a newer gputop: skipped


def open_recording(path: Path | str) -> Recording:
    """The header of ``path``; RecordingError (one line) when it cannot be read."""
    path = Path(path)
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise RecordingError(f"{path} is a folder, not a recording") from None
    except OSError as e:
        raise RecordingError(f"cannot read {path}: {e.strerror}") from None
    scan = Scan()
    with f:
        first = next(frames(f, str(path), scan), None)
    if first is None or first.kind != HEADER:
        why = scan.damage or "it has no header"
        raise RecordingError(f"{path} cannot be read: {why}")
    if len(first.payload) > MAX_HEADER:
        raise RecordingError(f"{path} cannot be read: its header is larger than any gputop writes")
    try:
        header = _json(first.payload)
    except CodecError as e:
        raise RecordingError(f"{path} cannot be read: its header is damaged ({e})") from None
    except ValueError:
        raise RecordingError(f"{path} cannot be read: its header is not JSON") from None
    if not isinstance(header, dict) or header.get("format") != "gputop.recording":
        raise RecordingError(f"{path} is not a gputop recording")
    version = header.get("version")
    if type(version) is not int or version < 1:
        raise RecordingError(f"{path} has no valid format version")
    if version > FORMAT_VERSION:
        raise RecordingError(
            f"{path} was written by gputop {header.get('gputop_version', '?')} in format "
            f"{version}; this gputop reads format {FORMAT_VERSION}: upgrade gputop to read it"
        )
    t0 = header.get("t0")
    finite = isinstance(t0, int | float) and -1e300 < t0 < 1e300  # float() of 10**400 raises
    if not finite or not isinstance(t0, int | float) or not isinstance(header.get("fields"), dict):
        raise RecordingError(f"{path} cannot be read: its header is incomplete")
    schema = Schema()
    try:
        dec = schema.decoder(header["fields"])
        raw_devices = header.get("devices")
        if not isinstance(raw_devices, list):
            raise CodecError("no device list")
        devices = tuple(dec.record(DeviceInfo, d) for d in raw_devices)
    except CodecError as e:
        raise RecordingError(f"{path} cannot be read: its header is damaged ({e})") from None
    return Recording(path, header, devices, float(t0), _schema=schema)
