"""Reading a session file: the header, then the records in order, or only the summaries.

Total over any input: a file that is not a recording, from a newer format, cut short or
damaged gives a ``RecordingError`` (nothing usable) or, once the header is read, stops at the
damage and says where in ``damage`` while keeping everything before it.
"""

from __future__ import annotations

import json
import zlib
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

__all__ = ["Record", "Recording", "RecordingError", "open_recording"]


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
        begin = None
        if start is not None or from_offset is not None:
            starts = self.segment_starts()
            if from_offset is not None:
                begin = max((o for _, o in starts if o <= from_offset), default=None)
            else:
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
                    text = stream.decompress(fr.payload)
                    lines = text.decode().splitlines()
                except (zlib.error, UnicodeDecodeError):
                    self.damage = f"damaged at byte {fr.offset:,} (does not decompress)"
                    return
                for line in lines:
                    try:
                        rec, last_verdict = _decode(json.loads(line), dec, agents, last_verdict)
                    except (ValueError, CodecError, TypeError) as e:
                        self.damage = f"damaged at byte {fr.offset:,} ({e})"
                        return
                    if rec is not None and (from_offset is None or fr.offset >= from_offset):
                        yield rec
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


def _summary(payload: bytes) -> dict[str, Any] | None:
    try:
        part = json.loads(zlib.decompress(payload))
    except (zlib.error, ValueError):
        return None
    if not isinstance(part, dict) or not _summary_shape(part):
        return None
    return part


def _summary_shape(p: dict[str, Any]) -> bool:
    """Every part ``merge`` and the report read, with the types they expect."""
    try:
        return (
            _maybe_num(p.get("t0"))
            and _maybe_num(p.get("t1"))
            and (p.get("t0") is None) == (p.get("t1") is None)  # merge takes both or neither
            and _map_of(p["verdict_s"], _num)
            and _map_of(p["throttle_s"], lambda g: _map_of(g, _num))
            and _map_of(p["findings"], _finding)
            and _list_of(p["changes"], _change)
            and _list_of(p["secondary"], lambda c: isinstance(c, list) and len(c) == 3)
            and all(_int_key(k) for k in (*p["gpus"], *p.get("points", {}), *p["ranks"]))
            and _list_of(p["events"], _event)
            and _map_of(p["ranks"], _rank)
            and _map_of(p["gpus"], _gpu)
            and _map_of(p.get("points", {}), _point)
            and isinstance(p["carry"], dict)
        )
    except (KeyError, TypeError):
        return False


def _int_key(k: Any) -> bool:
    """What int() reads back: ASCII digits ("²".isdigit() too), one sign, text at all."""
    return isinstance(k, str) and k.isascii() and k.removeprefix("-").isdigit()


def _finding(f: Any) -> bool:
    return (
        isinstance(f, dict)
        and _num(f.get("confidence"))
        and isinstance(f.get("summary"), str)
        and _list_of(f.get("levers"), lambda x: isinstance(x, str))
        and _list_of(
            f.get("evidence"),
            lambda e: (
                isinstance(e, dict)
                and isinstance(e.get("text"), str)
                and isinstance(e.get("source"), str)
            ),
        )
    )


def _change(c: Any) -> bool:
    return (
        isinstance(c, list)
        and len(c) == 4
        and _num(c[0])
        and (c[1] is None or isinstance(c[1], str))
        and _num(c[2])
        and isinstance(c[3], str)
    )


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _maybe_num(v: Any) -> bool:
    return v is None or _num(v)


def _map_of(m: Any, ok: Any) -> bool:
    return isinstance(m, dict) and all(ok(v) for v in m.values())


def _list_of(xs: Any, ok: Any) -> bool:
    return isinstance(xs, list) and all(ok(x) for x in xs)


def _event(e: Any) -> bool:
    return (
        isinstance(e, list)
        and len(e) == 4
        and _num(e[0])
        and isinstance(e[2], str)
        and isinstance(e[3], dict)
    )


def _rank(r: Any) -> bool:
    numbers = ("steps", "seconds", "flops", "flops_s", "samples", "tokens")
    return (
        isinstance(r, dict)
        and all(_num(r.get(k)) for k in numbers)
        and _map_of(r.get("hist"), lambda n: type(n) is int)
        and all(_int_key(k) for k in r["hist"])
        and (  # absent from files written before it
            r.get("work_hist") is None
            or (
                _map_of(r["work_hist"], lambda n: type(n) is int)
                and all(_int_key(k) for k in r["work_hist"])
            )
        )
        and _map_of(r.get("phases"), _num)
        and isinstance(r.get("fingerprint", {}), dict)
    )


def _gpu(g: Any) -> bool:
    numbers = ("n", "util", "sm", "power", "n_sm")
    return (
        isinstance(g, dict)
        and all(_num(g.get(k)) for k in numbers)
        and _maybe_num(g.get("temp_max"))
    )


def _point(p: Any) -> bool:
    return (
        isinstance(p, list) and len(p) == 5 and all(_num(x) for x in p[:4]) and _map_of(p[4], _num)
    )


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
    try:
        header = json.loads(first.payload)
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
    if not finite or not isinstance(header.get("fields"), dict):
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
