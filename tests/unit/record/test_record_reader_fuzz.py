"""The reader is total: whatever a session file became (cut anywhere, bytes overwritten,
garbage appended, a header from another version or missing parts, not a recording at all),
``open_recording`` raises RecordingError (one line naming the file) or gives a Recording whose
records, summaries and report all complete; never a traceback of another type. What was
intact before the damage reads as it was written, and the damage is said."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from builders import SmallRecording, small_recording
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tests_support import fuzz_examples

from gputop.record import reader
from gputop.record.fileformat import (
    DATA,
    FRAME,
    HEADER,
    MAGIC,
    NEW_STREAM,
    SUMMARY,
    RecordingError,
    pack,
)
from gputop.record.playback import Playback
from gputop.record.reader import MAX_DEPTH, Record, Recording, open_recording
from gputop.record.replay import check
from gputop.record.report import build_report, render_report

FUZZ = settings(
    max_examples=fuzz_examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def original(folder) -> SmallRecording:
    return small_recording(str(folder))


def exercise(path: Path) -> tuple[Recording | None, list[Record]]:
    """Everything `gputop replay --check` and `gputop report` do with a file; a RecordingError
    must be one line that names the file. The recording's ``damage`` is what reading the
    records found; ``report_damage`` what the report says."""
    try:
        recording = open_recording(path)
    except RecordingError as e:
        message = str(e)
        assert "\n" not in message and str(path) in message, message
        return None, []
    got = list(recording.records())
    damage = recording.damage
    recording.summaries()
    doc = build_report(recording)
    json.dumps(doc)
    text = render_report(doc)  # with charts: plotext aborts the process on some values
    assert "Time per verdict" in text
    assert doc["recording"]["damage"] == recording.damage
    recording.report_damage = recording.damage  # type: ignore[attr-defined]
    playback = Playback(recording, speed=64.0)  # replay: every record through a session
    playback.seek(playback.total)
    recording.damage = damage
    return recording, got


def write(folder: Path, data: bytes) -> Path:
    path = folder / "case.gputop"
    path.write_bytes(data)
    return path


def prefix(got: list[Record], b: SmallRecording) -> bool:
    return tuple(got) == b.records[: len(got)]


# ---- damage to the bytes ----


@FUZZ
@given(st.data())
def test_a_file_cut_at_any_byte_reads_up_to_the_cut(folder, original, data):
    b = original
    header_end = min(e for e in b.boundaries)
    cut = data.draw(
        st.one_of(
            st.integers(0, len(b.data)),
            st.sampled_from(sorted(b.boundaries)),
            st.sampled_from(sorted(b.boundaries)).map(lambda x: x - 1),
        )
    )
    recording, got = exercise(write(folder, b.data[:cut]))
    if cut < header_end:
        assert recording is None
        return
    assert recording is not None
    assert prefix(got, b)
    if cut in b.boundaries:
        assert recording.damage is None
    else:
        assert recording.damage is not None and "ends inside a frame" in recording.damage
    if cut == len(b.data):
        assert len(got) == len(b.records)


def _field_of(b: SmallRecording, pos: int) -> tuple[int, str]:
    """(frame kind, which part of it) of the byte at ``pos``."""
    if pos < len(MAGIC):
        return 0, "magic"
    kind, start, payload = max((s for s in b.spans if s[1] <= pos), key=lambda s: s[1])
    if pos >= payload:
        return kind, "payload"
    return kind, ("kind", "flags", "length", "length", "length", "length", *["t"] * 8,
                  *["crc"] * 8)[pos - start]  # fmt: skip


@FUZZ
@given(st.data())
def test_overwritten_bytes_anywhere_stop_the_reading_there_and_say_so(folder, original, data):
    b = original
    pos = data.draw(st.integers(0, len(b.data) - 1), label="pos")
    flip = data.draw(st.booleans(), label="flip")
    if flip:  # one bit
        bit = data.draw(st.integers(0, 7), label="bit")
        new = bytes([b.data[pos] ^ (1 << bit)])
    else:
        new = data.draw(st.binary(min_size=1, max_size=6), label="bytes")[: len(b.data) - pos]
    assume(new != b.data[pos : pos + len(new)])
    damaged = b.data[:pos] + new + b.data[pos + len(new) :]
    recording, got = exercise(write(folder, damaged))
    changed = [p for p in range(pos, pos + len(new)) if damaged[p] != b.data[p]]
    parts = {_field_of(b, p) for p in changed}
    if recording is None and any(kind == HEADER or part == "magic" for kind, part in parts):
        return
    assert recording is not None, parts
    if parts <= {(DATA, "t"), (SUMMARY, "t"), (SUMMARY, "flags")}:
        # only where to seek changed (and flags no reader uses), but the frame header has its
        # own checksum over them: reading stops there, and says so
        assert recording.damage is not None and "header checksum" in recording.damage
        assert prefix(got, b)
        return
    if any(part in ("payload", "crc", "length") for _, part in parts):
        assert recording.damage is not None, parts
    if parts & {(DATA, "kind"), (DATA, "flags")}:
        return  # a segment's last second may read as a summary; the rest is below
    assert prefix(got, b), parts


@pytest.mark.parametrize(
    ("kind", "part", "at"),
    [(DATA, "t", 13), (DATA, "flags", 1), (SUMMARY, "t", 9), (SUMMARY, "flags", 1)],
)
def test_a_frame_time_or_flag_overwritten_stops_the_reading_at_that_frame(
    folder, original, kind, part, at
):
    """What the hypothesis test above hits only when it draws these bytes (it once expected
    every record to read past them; the reader was right: the frame header's own checksum
    covers them, and reading stops at that frame, keeping every record before it)."""
    b = original
    frames_of_kind = [start for k, start, _ in b.spans if k == kind]
    start = frames_of_kind[len(frames_of_kind) // 2]
    assert _field_of(b, start + at) == (kind, part)
    damaged = bytearray(b.data)
    damaged[start + at] ^= 0x10
    recording, got = exercise(write(folder, bytes(damaged)))
    assert recording is not None and recording.damage == (
        f"damaged at byte {start:,} (frame header checksum mismatch)"
    )
    before = list(open_recording(write(folder, b.data[:start])).records())
    assert tuple(got) == tuple(before) == b.records[: len(before)]
    assert 0 < len(got) < len(b.records)


@FUZZ
@given(st.binary(min_size=1, max_size=64))
def test_garbage_after_the_last_frame_is_damage_after_every_record(folder, original, junk):
    b = original
    recording, got = exercise(write(folder, b.data + junk))
    assert recording is not None
    assert tuple(got[: len(b.records)]) == b.records
    if len(junk) < FRAME.size or junk[0] not in (HEADER, DATA, SUMMARY):
        assert recording.damage is not None


def test_flags_and_kinds_that_lie_are_damage_not_silence(folder, original):
    """The bytes outside the checksum that decide how payloads decode."""
    b = original
    data_frames = [s for s in b.spans if s[0] == DATA]
    starts = [s for s in data_frames if b.data[s[1] + 1] & NEW_STREAM]
    # frames inside a segment, followed by another one of the same segment
    middles = [s for s, after in zip(b.spans, b.spans[1:], strict=False)
               if s[0] == after[0] == DATA and not b.data[after[1] + 1] & NEW_STREAM
               and not b.data[s[1] + 1] & NEW_STREAM]  # fmt: skip
    assert len(starts) >= 3 and middles
    cases = {
        "the first segment's start loses its flag": (starts[0][1] + 1, 0),
        "a segment's start loses its flag": (starts[1][1] + 1, b.data[starts[1][1] + 1] & ~1),
        "a frame mid-segment claims a new stream": (middles[-1][1] + 1, NEW_STREAM),
        "a data frame claims to be a header": (middles[0][1], HEADER),
        "a data frame claims to be a summary": (middles[0][1], SUMMARY),
        "a segment's first frame claims to be a summary": (starts[2][1], SUMMARY),
    }
    for why, (pos, value) in cases.items():
        damaged = b.data[:pos] + bytes([value]) + b.data[pos + 1 :]
        recording, got = exercise(write(folder, damaged))
        assert recording is not None, why
        # a data frame read as a summary is skipped by the records (the stream's next bytes
        # may then still decode) but is no summary: the report says so
        assert recording.damage or recording.report_damage, why
        assert prefix(got, b) and len(got) < len(b.records), why


def test_a_report_of_a_damaged_file_draws_its_charts(folder, original):
    b = original
    for cut in (len(b.data) // 3, len(b.data) - 5):
        recording = open_recording(write(folder, b.data[:cut]))
        text = render_report(build_report(recording), charts=True)
        assert "note: the file ends inside a frame" in text
        assert "step time" in text


# ---- checksums intact, content not: what only a bug or a hand-made file could hold ----


def mutate(data: st.DataObject, v: Any) -> Any:
    """``v`` with one value somewhere inside replaced, removed or added."""
    if isinstance(v, dict) and v:
        k = data.draw(st.sampled_from(sorted(v)))
        how = data.draw(st.sampled_from(["deeper", "replace", "delete", "new key"]))
        if how == "deeper":
            v[k] = mutate(data, v[k])
        elif how == "replace":
            v[k] = data.draw(JSON_VALUES)
        elif how == "delete":
            del v[k]
        else:
            v[data.draw(st.text(max_size=3))] = v[k]
        return v
    if isinstance(v, list) and v:
        i = data.draw(st.integers(0, len(v) - 1))
        v[i] = mutate(data, v[i]) if data.draw(st.booleans()) else data.draw(JSON_VALUES)
        return v
    return data.draw(JSON_VALUES)


def summary_frame(text: str) -> bytes:
    """A minute's summary frame holding ``text``, checksums right."""
    return pack(SUMMARY, 0, 1e9, zlib.compress(text.encode()))


@FUZZ
@given(st.data())
def test_a_checksummed_summary_of_any_shape_is_read_or_damage(folder, original, data):
    b = original
    part = json.loads(json.dumps(data.draw(st.sampled_from(b.summaries))))
    for _ in range(data.draw(st.integers(1, 3))):
        part = mutate(data, part)
    extra = summary_frame(json.dumps(part))
    _, got = exercise(write(folder, b.data + extra))
    assert tuple(got) == b.records


def resegment(b: SmallRecording, text: bytes) -> bytes:
    """The file with its first segment replaced by one data frame of ``text`` (records as JSON
    lines), checksums right: what only a bug or a hand-made file could hold."""
    header_end = min(b.boundaries)
    second = [start for kind, start, _ in b.spans if kind == DATA and b.data[start + 1] & 1][1]
    return (
        b.data[:header_end] + pack(DATA, NEW_STREAM, 500.0, zlib.compress(text)) + (b.data[second:])
    )


def as_text(lines: list[Any]) -> bytes:
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


def records_before(lines: list[Any], i: int) -> int:
    """Records the lines before line ``i`` decode to (a frame table is none)."""
    return sum(1 for x in lines[:i] if x[0] != "F")


def test_a_first_segment_rewritten_as_it_was_reads_the_same(folder, original):
    b = original
    recording, got = exercise(write(folder, resegment(b, as_text(list(b.lines)))))
    assert recording is not None and recording.damage is None
    assert tuple(got) == b.records


@FUZZ
@given(st.data())
def test_checksummed_records_of_any_shape_are_read_or_damage(folder, original, data):
    b = original
    lines = json.loads(json.dumps(b.lines))
    first = len(lines)
    for _ in range(data.draw(st.integers(1, 2))):
        i = data.draw(st.integers(0, len(lines) - 1))
        lines[i] = mutate(data, lines[i])
        first = min(first, i)
    _, got = exercise(write(folder, resegment(b, as_text(lines))))
    n = records_before(lines, first)
    assert tuple(got[:n]) == b.records[:n]


@pytest.mark.parametrize(
    ("t", "says"),
    [
        (float("inf"), "at a time no clock gives"),
        (float("-inf"), "at a time no clock gives"),
        (float("nan"), "at a time no clock gives"),
        (1e308, "the time of gpu readings goes back"),  # the next reading is earlier
    ],
)
def test_a_reading_at_a_time_no_clock_gives_is_damage_there(folder, original, t, says):
    """`replay --check` died on these (ValueError: timestamps must not go back)."""
    b = original
    lines = json.loads(json.dumps(b.lines))
    i, j = [i for i, x in enumerate(lines) if x[0] == "g"][:2]
    lines[i][1][0][1] = t  # GpuSample.t
    recording, got = exercise(write(folder, resegment(b, as_text(lines))))
    assert recording is not None and says in recording.damage
    stop = j if t == 1e308 else i  # a later time reads; the next one, earlier, is the damage
    assert len(got) == records_before(lines, stop)
    assert tuple(got[: records_before(lines, i)]) == b.records[: records_before(lines, i)]


def test_readings_that_go_back_in_time_are_damage_there(folder, original):
    b = original
    lines = json.loads(json.dumps(b.lines))
    hosts = [i for i, x in enumerate(lines) if x[0] == "h"]
    lines[hosts[1]], lines[hosts[2]] = lines[hosts[2]], lines[hosts[1]]
    recording, got = exercise(write(folder, resegment(b, as_text(lines))))
    assert recording is not None and "the time of host readings goes back" in recording.damage
    assert len(got) == records_before(lines, hosts[2])
    n = records_before(lines, hosts[1])
    assert tuple(got[:n]) == b.records[:n]


# ---- headers ----

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=8,
)  # fmt: skip


def with_header(b: SmallRecording, header: Any, magic: bytes = MAGIC) -> bytes:
    body = json.dumps(header).encode()
    first_end = min(b.boundaries)
    return magic + pack(HEADER, 0, 500.0, body) + b.data[first_end:]


@FUZZ
@given(st.data())
def test_any_header_is_read_or_refused_in_one_line(folder, original, data):
    b = original
    header = json.loads(json.dumps(b.header))
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        key = data.draw(st.sampled_from([*sorted(header), "fields.*", "fields.*.*"]), label="key")
        how = data.draw(st.sampled_from(["delete", "replace"]), label="how")
        fields = header.get("fields")
        if key.startswith("fields.") and isinstance(fields, dict) and fields:
            cls = data.draw(st.sampled_from(sorted(header["fields"])), label="class")
            names = header["fields"][cls]
            if key == "fields.*.*" and isinstance(names, list) and names:
                i = data.draw(st.integers(0, len(names) - 1), label="name")
                if how == "delete":
                    del names[i]
                else:
                    names[i] = data.draw(JSON_VALUES, label="name value")
            elif how == "delete":
                del header["fields"][cls]
            else:
                header["fields"][cls] = data.draw(JSON_VALUES, label="fields value")
        elif key in header:
            if how == "delete":
                del header[key]
            else:
                header[key] = data.draw(JSON_VALUES, label="value")
    exercise(write(folder, with_header(b, header)))


@pytest.mark.parametrize(
    ("version", "says"),
    [
        (2, "in format 2; this gputop reads format 1: upgrade gputop"),
        (0, "no valid format version"),
        ("1", "no valid format version"),
        (1.0, "no valid format version"),
        (True, "no valid format version"),
        (None, "no valid format version"),
    ],
)
def test_a_header_of_another_version_is_refused(folder, original, version, says):
    header = {**original.header, "version": version}
    path = write(folder, with_header(original, header))
    with pytest.raises(RecordingError, match=says) as e:
        open_recording(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"format": "something else"}, "is not a gputop recording"),
        ({"t0": None}, "header is incomplete"),
        ({"fields": None}, "header is incomplete"),
        ({"fields": {}}, "no field list for DeviceInfo"),
        ({"devices": None}, "no device list"),
        ({"devices": [[1, 2]]}, "DeviceInfo record has the wrong shape"),
    ],
)
def test_a_header_missing_what_reading_needs_is_refused(folder, original, change, says):
    path = write(folder, with_header(original, {**original.header, **change}))
    with pytest.raises(RecordingError, match=says):
        open_recording(path)


@pytest.mark.parametrize("wall", [1e300, -1e20, float("nan"), float("inf"), 10**30])
def test_a_start_time_no_calendar_has_is_reported_as_unknown(folder, original, wall):
    header = {**original.header, "created_wall": wall}
    recording, got = exercise(write(folder, with_header(original, header)))
    assert recording is not None and tuple(got) == original.records
    assert build_report(recording)["recording"]["started"] is None


@pytest.mark.parametrize("t0", [10**400, float("nan"), float("inf"), "1000", None])
def test_a_header_clock_that_is_no_number_is_refused(folder, original, t0):
    path = write(folder, with_header(original, {**original.header, "t0": t0}))
    with pytest.raises(RecordingError, match="header is incomplete"):
        open_recording(path)


def test_a_header_without_what_only_the_report_shows_still_reads(folder, original):
    header = {k: v for k, v in original.header.items()
              if k not in ("session", "hostname", "created_wall", "gputop_version")}  # fmt: skip
    recording, got = exercise(write(folder, with_header(original, header)))
    assert recording is not None and tuple(got) == original.records
    doc = build_report(recording)
    assert doc["recording"]["started"] is None and doc["recording"]["command"] is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        MAGIC[:5],
        MAGIC,
        MAGIC + b"\x01\x00",
        b"GPUTOP-RECORDING\r\n" + b"\x00" * 40,
        b"\x89PNG\r\n\x1a\n" + b"\x00" * 100,
        b"#!/bin/sh\necho hello\n",
        MAGIC + pack(DATA, NEW_STREAM, 1.0, zlib.compress(b"[]")),
        MAGIC + pack(HEADER, 0, 1.0, b"not json"),
        MAGIC + pack(HEADER, 0, 1.0, b"[1, 2]"),
        MAGIC + pack(HEADER, 0, 1.0, b'{"format": "gputop.recording"}'),
    ],
)
def test_what_is_not_a_recording_is_refused_in_one_line(folder, data):
    path = write(folder, data)
    with pytest.raises(RecordingError) as e:
        open_recording(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


@FUZZ
@given(st.binary(max_size=200), st.booleans())
def test_random_bytes_are_refused_or_read(folder, junk, with_magic):
    exercise(write(folder, (MAGIC if with_magic else b"") + junk))


def test_a_missing_file_and_a_folder_are_refused_in_one_line(folder):
    for path, says in ((folder / "nope.gputop", "no such file"), (folder, "is a folder")):
        with pytest.raises(RecordingError, match=says) as e:
            open_recording(path)
        assert str(path) in str(e.value)


# ---- hostile structure under valid checksums (issue 17 item 10) ----

_SLOT = "\x00hostile\x00"
HOSTILE = st.one_of(
    st.integers(MAX_DEPTH + 1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(MAX_DEPTH + 1, 3000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.integers(100, 6000).map(lambda n: "9" * n),  # more digits than int() reads
    st.sampled_from([
        "1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1e308", "-0.0", "0", "-1",
        "9223372036854775808", "-9223372036854775809", "true", "false", "null", '""', "[]",
        "{}", "[[1,2],[3]]", '{"x":[]}', '[{"a":1}]', '"\\u0000"', '"\\ud800"', '"x"',
    ]),
    JSON_VALUES.map(json.dumps),
)  # fmt: skip
"""Raw JSON where a value was: deeper than any record, numbers no clock or int holds, the
wrong type (a list or object where a hashable value is expected)."""


def _plant(data: st.DataObject, v: Any) -> Any:
    """``v`` with one value somewhere inside replaced by the slot (a raw token goes there)."""
    if isinstance(v, dict) and v and data.draw(st.integers(0, 3)):
        k = data.draw(st.sampled_from(sorted(v)))
        v[k] = _plant(data, v[k])
        return v
    if isinstance(v, list) and v and data.draw(st.integers(0, 3)):
        i = data.draw(st.integers(0, len(v) - 1))
        v[i] = _plant(data, v[i])
        return v
    return _SLOT


def _hostile_text(data: st.DataObject, v: Any) -> str:
    return json.dumps(_plant(data, v)).replace(json.dumps(_SLOT), data.draw(HOSTILE), 1)


def _replayed(path: Path) -> tuple[Recording | None, list[Record]]:
    """``exercise`` and `gputop replay --check` too."""
    recording, got = exercise(path)
    if recording is not None:
        check(recording).text()
    return recording, got


@settings(FUZZ, max_examples=fuzz_examples(60))
@given(st.data())
def test_checksummed_hostile_records_are_damage_where_they_are(folder, original, data):
    """`report` and `replay --check` died on these (RecursionError, ValueError: timestamps
    must not go back, TypeError: unhashable)."""
    b = original
    lines = [json.dumps(x) for x in b.lines]
    how = data.draw(st.sampled_from(["token", "token", "token", "swap", "copy", "drop"]))
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    first = i
    if how == "token":
        lines[i] = _hostile_text(data, json.loads(lines[i]))
    else:
        j = data.draw(st.integers(0, len(lines) - 1), label="other")
        first = min(i, j)
        if how == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif how == "copy":
            lines.insert(j, lines[i])
        else:
            del lines[i]
            first = i
    text = "".join(line + "\n" for line in lines).encode()
    recording, got = _replayed(write(folder, resegment(b, text)))
    assert recording is not None
    n = records_before(list(b.lines), first)
    assert tuple(got[:n]) == b.records[:n]


@settings(FUZZ, max_examples=fuzz_examples(40))
@given(st.data())
def test_checksummed_hostile_summaries_are_skipped_as_damage(folder, original, data):
    b = original
    part = json.loads(json.dumps(data.draw(st.sampled_from(b.summaries))))
    if data.draw(st.booleans()):  # what the minutes after it are summarised from
        part["carry"] = _plant(data, part["carry"])
        text = json.dumps(part).replace(json.dumps(_SLOT), data.draw(HOSTILE), 1)
    else:
        text = _hostile_text(data, part)
    extra = summary_frame(text)
    # a minute after the summary, which the report summarises from its records and the carry
    after = pack(DATA, NEW_STREAM, 2e9, zlib.compress(as_text(list(b.lines[:12]))))
    _, got = exercise(write(folder, b.data + extra + after))
    assert tuple(got[: len(b.records)]) == b.records


@settings(FUZZ, max_examples=fuzz_examples(40))
@given(st.data())
def test_a_hostile_header_is_read_or_refused_in_one_line(folder, original, data):
    header = json.loads(json.dumps(original.header))
    body = _hostile_text(data, header).encode()
    _replayed(
        write(
            folder, MAGIC + pack(HEADER, 0, 500.0, body) + original.data[min(original.boundaries) :]
        )
    )


def _bomb(original: SmallRecording, chunk: bytes, times: int) -> bytes:
    """The real file's header, then one data frame that inflates to ``chunk * times``."""
    z = zlib.compressobj(9)
    payload = b"".join(z.compress(chunk) for _ in range(times)) + z.flush(zlib.Z_SYNC_FLUSH)
    return original.data[: min(original.boundaries)] + pack(DATA, NEW_STREAM, 500.0, payload)


def test_a_zlib_bomb_is_damage_in_bounded_memory(folder, original):
    """370 KB that inflate to 370 MB took `gputop report` to 760 MB; now a record may be
    8 MiB and is read a MiB at a time."""
    import tracemalloc

    path = write(folder, _bomb(original, b" " * (1 << 20), 360))
    assert path.stat().st_size < 400_000
    tracemalloc.start()
    try:
        recording, got = exercise(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert recording is not None and got == []
    assert "a record longer than 8 MiB" in recording.damage and recording.bad
    assert peak < 48 << 20, peak


def test_a_frame_that_inflates_past_the_cap_is_damage(folder, original, monkeypatch):
    """Records that are each fine but more than a frame could ever hold (capped low here:
    the real cap is 64 MiB)."""
    monkeypatch.setattr(reader, "MAX_INFLATED", 1 << 20)
    line = (json.dumps(original.lines[0]) + "\n").encode()  # the same verdict, again and again
    path = write(folder, _bomb(original, line * 1000, 40))
    recording, got = exercise(path)
    assert recording is not None and "a frame inflates past 1 MiB" in recording.damage
    assert 0 < len(got) < 40_000


def test_an_evaluation_point_whose_series_is_not_a_pid_is_damage():
    """Found by the fuzz test above in CI: ("host", []) reached the timeline as a dict key
    (TypeError: unhashable type: 'list')."""
    from gputop.record.events import CodecError, decode_point

    assert decode_point([500.0, [["host", 31337], 500.0], None]).host == (("host", 31337), 500.0)
    for key in (["host", []], ["host", {}], ["host", 1.5], ["host", True], ["host", "7"]):
        with pytest.raises(CodecError):
            decode_point([500.0, [key, 500.0], None])


def test_a_summary_whose_gpu_has_no_hottest_reading_still_reports(folder, original):
    """Found by the summary fuzz test in CI: the reader let a minute's GPU leave out
    ``temp_max`` and merging the minutes raised KeyError."""
    part = json.loads(json.dumps(original.summaries[0]))
    assert part["gpus"]
    for g in part["gpus"].values():
        del g["temp_max"]
    extra = summary_frame(json.dumps(part))
    recording, got = exercise(write(folder, original.data + extra))
    assert recording is not None and tuple(got) == original.records
    gpus = build_report(recording)["gpus"]
    assert gpus and all("temp_c_max" in g for g in gpus)


def test_a_histogram_bucket_no_step_time_gives_is_damage(folder, original):
    """The report takes exp() of a bucket: 99999 overflows (OverflowError before)."""
    part = json.loads(json.dumps(original.summaries[0]))
    rank = next(iter(part["ranks"].values()))
    rank["hist"] = {"99999": sum(rank["hist"].values())}
    minute = summary_frame(json.dumps(part))
    recording, got = exercise(write(folder, original.data + minute))
    assert recording is not None and tuple(got) == original.records
    assert "damaged" in (recording.report_damage or "")  # type: ignore[attr-defined]


def test_mfu_over_a_step_time_no_float_holds_is_not_computed(folder, original):
    """MFU takes the step in ns: 1e300 s of it is inf, and int(inf) raised OverflowError."""
    part = json.loads(json.dumps(original.summaries[0]))
    rank = next(iter(part["ranks"].values()))
    before = sum(s["ranks"]["0"]["flops"] for s in original.summaries)
    rank["flops"], rank["flops_s"] = 1e6 - before, 1e300  # 1e6 flops in all
    minute = summary_frame(json.dumps(part))
    recording, _ = exercise(write(folder, original.data + minute))
    assert recording is not None
    assert all(r["mfu"] is None for r in build_report(recording)["ranks"])
