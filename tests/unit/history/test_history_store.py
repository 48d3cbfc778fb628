"""The jobs' memory on disk: private, written whole (a crash mid-write leaves the last good
file), bounded, and any file in it that gputop did not write is one line and passed over."""

from __future__ import annotations

import json
import os
import stat

import pytest

from gputop.diagnose import Mean, Remembered, RememberedLever, RunSummary
from gputop.history import store
from gputop.history.store import Memory, memory_root
from gputop.model.job_key import job_key
from gputop.vocab import budget as b


def run_of(script: str = "train.py", started: float = 1.7e9, step_s: float = 0.2) -> Remembered:
    key = job_key([script, "--lr", "0.1"], "/proj", 2)
    assert key is not None
    shares = dict.fromkeys(b.SLICES, (0.0, 0.0))
    shares[b.COMPUTE] = (0.7, 0.01)
    shares[b.DATA] = (0.3, 0.01)
    lever = RememberedLever("Raise num_workers", b.DATA, 0.2, 0.1, 0.3)
    run = RunSummary(Mean(step_s, 0.001, 500), shares)
    settings = {"dataloader.num_workers": "0"}
    return Remembered(key, started, started + 60, run, settings, "data-bound", lever, "0.1.0")


def test_a_run_kept_is_the_next_runs_last_and_the_files_are_private(tmp_path):
    m = Memory(tmp_path / "jobs")
    r = run_of()
    m.keep(r, "a")
    got = Memory(tmp_path / "jobs").last(r.key)
    assert got == r
    assert m.last(r.key, besides="a") is None  # a session never compares with itself
    assert stat.S_IMODE(os.stat(tmp_path / "jobs").st_mode) == 0o700
    (f,) = os.listdir(tmp_path / "jobs")
    assert stat.S_IMODE(os.stat(tmp_path / "jobs" / f).st_mode) == 0o600
    assert m.problem is None and m.notes == []


def test_keeping_the_same_run_again_replaces_it_and_runs_are_bounded(tmp_path):
    m = Memory(tmp_path)
    for i in range(store.RUNS_KEPT + 5):
        m.keep(run_of(started=1.7e9 + i), f"run{i}")
        m.keep(run_of(started=1.7e9 + i, step_s=0.3), f"run{i}")  # its later save
    ((_, runs),) = m.jobs()
    assert len(runs) == store.RUNS_KEPT
    assert runs[-1].started == 1.7e9 + store.RUNS_KEPT + 4 and runs[-1].run.step.value == 0.3


def test_jobs_are_bounded_the_longest_unwatched_forgotten(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "JOBS_KEPT", 3)
    m = Memory(tmp_path)
    for i in range(5):
        m.keep(run_of(f"s{i}.py"), "x")
        os.utime(tmp_path / f"{run_of(f's{i}.py').key.id}.json", (1e9 + i, 1e9 + i))
    assert sorted(k.script for k, _ in m.jobs()) == ["/proj/s2.py", "/proj/s3.py", "/proj/s4.py"]


def test_a_crash_mid_write_leaves_the_last_good_file(tmp_path, monkeypatch):
    m = Memory(tmp_path)
    first = run_of()
    m.keep(first, "a")

    def crash(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    m.keep(run_of(started=1.8e9), "b")
    monkeypatch.undo()
    assert m.problem is not None and "No space left on device" in m.problem
    assert [n for n in os.listdir(tmp_path) if n.endswith(".partial")] == []
    assert Memory(tmp_path).last(first.key) == first


def test_a_partial_file_left_by_a_killed_monitor_is_swept(tmp_path):
    Memory(tmp_path).keep(run_of(), "a")
    left = tmp_path / ".x.json.1.2.partial"
    left.write_text("{")
    os.utime(left, (1e9, 1e9))
    m = Memory(tmp_path)
    assert m.last(run_of().key) is not None
    assert not left.exists()


@pytest.mark.parametrize(
    "content",
    [
        b"{",
        b"[]",
        b'{"format": 2}',
        b'{"format": 1, "job": {"script": "x", "world_size": -1}}',
        b'{"format": 1, "job": {"script": "x", "world_size": 2}, "runs": 7}',
        b"\xff\xfe",
        b"[" * 100000,
        b" " * (store.FILE_MOST + 1),
    ],
    ids=["cut", "list", "format", "world", "runs", "bytes", "deep", "big"],
)
def test_a_damaged_file_is_one_line_and_passed_over(tmp_path, content):
    r = run_of()
    (tmp_path / f"{r.key.id}.json").write_bytes(content)
    m = Memory(tmp_path)
    assert m.last(r.key) is None
    assert len(m.notes) == 1 and "\n" not in m.notes[0] and "passed over" in m.notes[0]
    m.keep(r, "a")  # the next keep writes a good file over it
    assert Memory(tmp_path).last(r.key) == r


def test_damaged_runs_are_passed_over_and_the_others_kept(tmp_path):
    m = Memory(tmp_path)
    r = run_of()
    m.keep(r, "a")
    path = tmp_path / f"{r.key.id}.json"
    doc = json.loads(path.read_text())
    bad = dict(doc["runs"][0], id="b", step={"mean_s": "fast", "error_s": 0, "steps": 1})
    worse = dict(doc["runs"][0], id="c", shares={"data": [2.0, 0]})
    doc["runs"] += [bad, worse, "x"]
    path.write_text(json.dumps(doc))
    m2 = Memory(tmp_path)
    assert m2.last(r.key) == r
    assert m2.notes == [f"{path}: 3 damaged run(s) passed over"]


def test_a_file_that_is_a_link_is_passed_over(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text(json.dumps({"format": 1}))
    jobs = tmp_path / "jobs"
    jobs.mkdir(mode=0o700)
    r = run_of()
    os.symlink(secret, jobs / f"{r.key.id}.json")
    m = Memory(jobs)
    assert m.last(r.key) is None
    assert len(m.notes) == 1 and "cannot be read" in m.notes[0]


def test_a_memory_folder_others_may_write_is_refused_in_one_line(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    m = Memory(shared / "gputop" / "jobs")
    m.keep(run_of(), "a")
    assert m.last(run_of().key) is None
    assert m.problem is not None and m.problem.startswith("the job memory is off: ")
    assert "XDG_STATE_HOME" in m.problem and "\n" not in m.problem
    assert not (shared / "gputop").exists()


def test_a_memory_folder_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    os.symlink(tmp_path / "elsewhere", tmp_path / "jobs")
    m = Memory(tmp_path / "jobs")
    assert m.jobs() == []
    assert m.problem is not None and "symlink" in m.problem


def test_the_folder_is_the_xdg_state_home_else_the_home():
    assert str(memory_root({"XDG_STATE_HOME": "/s", "HOME": "/h"})) == "/s/gputop/jobs"
    assert (
        str(memory_root({"XDG_STATE_HOME": "rel", "HOME": "/h"})) == "/h/.local/state/gputop/jobs"
    )
    assert str(memory_root({"HOME": "/h"})) == "/h/.local/state/gputop/jobs"
