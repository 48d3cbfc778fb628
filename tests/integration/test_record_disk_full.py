"""`gputop record` onto a disk that is already full (issue 17 item 8): before, the header
failed on the recorder's thread, a 0-byte file stayed behind (blocking the name: gputop never
overwrites) and record went on and exited 0. Now: one line, exit 1, no file. A real full
filesystem: a 64 KiB tmpfs filled up (root only; skipped otherwise)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def full_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "full"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                       capture_output=True, text=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        with contextlib.suppress(OSError), open(mnt / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_record_onto_a_full_disk_says_so_leaves_no_file_and_fails(full_disk):
    out = full_disk / "job.gputop"
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        r = subprocess.run(
            [sys.executable, "-m", "gputop", "record", "--pid", str(target.pid),
             "--sim-board", "h100", "-o", str(out), "--duration", "30"],
            capture_output=True, text=True, timeout=60, cwd=REPO,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )  # fmt: skip
    finally:
        target.kill()
        target.wait()
    assert r.returncode == 1, r.stdout + r.stderr
    assert not out.exists()
    said = [line for line in r.stderr.splitlines() if "disk is full" in line]
    assert said == [
        f"gputop: cannot record to {out}: the disk is full; nothing was recorded and the file "
        "was removed (free some space or give -o a path on another disk)"
    ], r.stderr
    assert "Traceback" not in r.stderr
