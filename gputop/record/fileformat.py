"""The session file's framing (docs/recording.md): a magic line, then frames.

    file   := MAGIC  frame*
    frame  := kind:u8 flags:u8 length:u32 t:f64 head_crc:u32 crc32:u32 payload[length]
              (little endian; head_crc covers the 14 bytes before it, crc32 the payload, so
              a reader that seeks over payloads still trusts the kinds, lengths and times)

- kind 1, the header: JSON (format version, devices, field names of every class, the session).
- kind 2, data: a piece of one zlib stream of newline-separated JSON records, ended with a sync
  flush, so every frame decodes as soon as it is on disk: a recorder killed with SIGKILL leaves
  every frame it wrote readable. Flag ``NEW_STREAM`` starts a new stream (a *segment*: a reader
  can start there, and damage stays inside one segment).
- kind 3, a summary of the minute before it (zlib JSON on its own): `gputop report` reads these
  and skips the data frames, so a day-long recording reports in seconds.

``t`` is the monotonic time of the frame's first record, for seeking without decompressing.
Append-only: a frame is written with one ``write`` and never changed.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from gputop.errors import BadInput

MAGIC = b"GPUTOP-RECORDING\n"
FORMAT_VERSION = 1
HEADER, DATA, SUMMARY = 1, 2, 3
NEW_STREAM = 1
HEAD = struct.Struct("<BBId")
FRAME = struct.Struct("<BBIdII")
MAX_FRAME = 64 * 2**20
"""No frame is ever this large: a larger length is damage, not a reason to allocate."""


class RecordingError(BadInput):
    """A file given to read (replay, report) cannot be read as a recording at all: one line
    saying what and what to do. Writing one that cannot start is ``RecordError``."""

    when = "a file given to replay or report that is no readable recording"


@dataclass(frozen=True, slots=True)
class FileFrame:
    """One frame of a session file as read back: its kind, flags, time, payload and where it
    starts (a reader reports damage by offset)."""

    kind: int
    flags: int
    t: float
    payload: bytes
    offset: int


def pack(kind: int, flags: int, t: float, payload: bytes) -> bytes:
    head = HEAD.pack(kind, flags, len(payload), t)
    return head + struct.pack("<II", zlib.crc32(head), zlib.crc32(payload)) + payload


@dataclass
class Scan:
    """Frames read so far, and why reading stopped early (None: the file ended cleanly)."""

    damage: str | None = None


def frames(
    f: BinaryIO,
    name: str,
    scan: Scan,
    skip_data: bool = False,
    start_offset: int | None = None,
) -> Iterator[FileFrame]:
    """Every intact frame; stops at the first short or damaged one, saying why in ``scan``.
    With ``skip_data`` data frames are seeked over (their payload is not read); with
    ``start_offset`` reading begins at that frame (one found by an earlier scan)."""
    head = f.read(len(MAGIC))
    if head != MAGIC:
        if MAGIC.startswith(head):
            raise RecordingError(f"{name} is empty or was cut off before its first frame")
        raise RecordingError(f"{name} is not a gputop recording (record one with --record FILE)")
    offset = len(MAGIC)
    if start_offset is not None and start_offset > offset:
        offset = f.seek(start_offset)
    while True:
        raw = f.read(FRAME.size)
        if not raw:
            return
        if len(raw) < FRAME.size:
            scan.damage = _cut(offset)
            return
        kind, flags, length, t, head_crc, crc = FRAME.unpack(raw)
        if zlib.crc32(raw[: HEAD.size]) != head_crc:
            scan.damage = f"damaged at byte {offset:,} (frame header checksum mismatch)"
            return
        misplaced = (kind == HEADER) != (offset == len(MAGIC))  # the header only, first
        if kind not in (HEADER, DATA, SUMMARY) or misplaced or length > MAX_FRAME or t != t:
            scan.damage = f"damaged at byte {offset:,} (not a frame there)"
            return
        if skip_data and kind == DATA:
            here = f.tell()
            end = f.seek(length, 1)
            if f.seek(0, 2) < end:
                scan.damage = _cut(offset)
                return
            f.seek(here + length)
            yield FileFrame(kind, flags, t, b"", offset)
            offset += FRAME.size + length
            continue
        payload = f.read(length)
        if len(payload) < length:
            scan.damage = _cut(offset)
            return
        if zlib.crc32(payload) != crc:
            scan.damage = f"damaged at byte {offset:,} (checksum mismatch)"
            return
        yield FileFrame(kind, flags, t, payload, offset)
        offset += FRAME.size + length


CUT = "ends inside a frame"
"""How the damage of a file cut short starts (the recorder killed mid-write): not a bad file."""


def _cut(offset: int) -> str:
    return (
        f"{CUT} at byte {offset:,}: the recorder stopped mid-write (killed or out of disk); "
        "everything before it is read"
    )
