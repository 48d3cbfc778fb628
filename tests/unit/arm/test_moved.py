"""What moved between a hang's two dumps (``gputop/arm/moved.py``): threads in the same frames
are counted, those whose stacks changed named with their top frames; a dump that is not one
(damaged, too big) is said in one line."""

from __future__ import annotations

import json
from pathlib import Path

from gputop.arm import moved as m


def dump(folder: Path, threads: dict[tuple[int, int, str], list[str]]) -> Path:
    folder.mkdir()
    procs: dict[int, list] = {}
    for (pid, tid, name), frames in threads.items():
        procs.setdefault(pid, []).append(
            {"tid": tid, "name": name,
             "frames": [{"name": f, "file": "x.py", "line": 1, "code": ""} for f in frames]}
        )  # fmt: skip
    doc = [{"pid": p, "role": "rank", "error": None, "threads": t} for p, t in procs.items()]
    (folder / "stacks.json").write_text(json.dumps(doc))
    return folder


def test_still_threads_are_counted_and_those_that_moved_named(tmp_path):
    first = dump(tmp_path / "a", {(1, 1, "MainThread"): ["wait", "train"],
                                  (1, 2, "loader"): ["read", "run"],
                                  (2, 3, "MainThread"): ["allreduce", "train"]})  # fmt: skip
    second = dump(tmp_path / "b", {(1, 1, "MainThread"): ["wait", "train"],
                                   (1, 2, "loader"): ["decode", "run"],
                                   (2, 4, "MainThread"): ["allreduce", "train"]})  # fmt: skip
    got = m.moved(first, second)
    assert got == {"still": 1, "moved": ["pid 1 thread loader: read (x.py:1) -> decode (x.py:1)"],
                   "new": 1, "gone": 1}  # fmt: skip


def test_a_dump_that_is_not_one_is_said_not_raised(tmp_path, monkeypatch):
    good = dump(tmp_path / "a", {(1, 1, "MainThread"): ["wait"]})
    bad = tmp_path / "b"
    bad.mkdir()
    (bad / "stacks.json").write_text('[{"pid": 1, "threads": [{"tid": "x"}]}]')
    assert m.moved(good, bad)["error"].startswith("cannot compare the two dumps: KeyError")
    assert "FileNotFoundError" in m.moved(good, tmp_path / "none")["error"]
    monkeypatch.setattr(m, "MAX_READ", 10)
    assert "is over" in m.moved(good, good)["error"]
