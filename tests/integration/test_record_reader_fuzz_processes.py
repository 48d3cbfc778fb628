"""`gputop report` and `gputop replay --check` run as commands over a damaged recording: one
line and exit 1 for damage inside, a report with charts for sums no float holds. They start a
process because what is checked is the command's output and exit status, and a plotext crash
takes the whole process down."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from builders import SmallRecording, small_recording

from gputop.record.fileformat import DATA, NEW_STREAM, SUMMARY, pack

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, SmallRecording]:
    """A folder, and a small real recording made in it."""
    folder = tmp_path_factory.mktemp("fuzz")
    return folder, small_recording(str(folder))


def write(folder: Path, data: bytes) -> Path:
    path = folder / "case.gputop"
    path.write_bytes(data)
    return path


def summary_frame(text: str) -> bytes:
    """A minute's summary frame holding ``text``, checksums right."""
    return pack(SUMMARY, 0, 1e9, zlib.compress(text.encode()))


def test_commands_say_a_damaged_file_in_one_line_and_exit_1(recorded):
    """`report`, `replay --check` over a file damaged inside: what was before it, one line,
    exit 1; a file cut at its end (killed) is no error."""
    folder, original = recorded
    import subprocess
    import sys

    deep = ("[" * 5000 + "]" * 5000 + "\n").encode()  # after the last summary: report reads it
    bad = write(folder, original.data + pack(DATA, NEW_STREAM, 1e9, zlib.compress(deep)))
    for args in (["report", "--no-charts"], ["report", "--json"], ["replay", "--check"]):
        r = subprocess.run([sys.executable, "-m", "gputop", *args, str(bad)],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        said = (r.stdout + r.stderr).lower()
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert "traceback" not in said and "nested deeper than any gputop writes" in said, args
    cut = folder / "cut.gputop"
    cut.write_bytes(original.data[:-5])
    r = subprocess.run([sys.executable, "-m", "gputop", "report", "--no-charts", str(cut)],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0 and "ends inside a frame" in r.stderr


def test_sums_no_float_holds_are_reported_and_left_out_of_the_charts(recorded):
    """A summary's numbers are any JSON number; three minutes of 1e308 sum to inf, and
    plotext aborts the whole process (std::bad_alloc) on a negative step time: `report`
    died on both before. Now it completes, with charts, and says what it left out."""
    folder, original = recorded
    import subprocess
    import sys

    part = json.loads(json.dumps(original.summaries[0]))
    first, second = sorted(part["points"], key=int)[:2]
    part["points"][first][0] = 1e308  # step seconds: inf once merged
    part["points"][second][0] = -1e308  # a negative mean step time
    rank = next(iter(part["ranks"].values()))
    rank["flops"], rank["flops_s"] = 1e308, 1e308  # MFU over an infinite step
    rank["phases"] = {k: 1e308 for k in rank["phases"]}  # shares of inf: nan
    minute = summary_frame(json.dumps(part))
    path = write(folder, original.data + minute * 3)
    r = subprocess.run([sys.executable, "-m", "gputop", "report", str(path)],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Phase breakdown" in r.stdout and "step time (ms" in r.stdout
    assert "points no measurement gives are left out" in r.stdout
