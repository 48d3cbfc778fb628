"""tree_facts and read_environ over a fake /proc: bounded, tolerant, read once per process."""

from __future__ import annotations

import os

from gputop.sources.procfs import read_environ, tree_facts


def fake(root, pid, ppid, comm, cmdline, env, kids=(), start=100):
    d = root / str(pid)
    (d / "task" / str(pid)).mkdir(parents=True)
    fields = ["S", str(ppid)] + ["0"] * 17 + [str(start)] + ["0"] * 5
    (d / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}")
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in cmdline.split()) + b"\0")
    if env is not None:
        (d / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in env.items()))
    (d / "task" / str(pid) / "children").write_text(" ".join(map(str, kids)))


def test_the_tree_with_launcher_variables_only_and_unreadable_environments(tmp_path):
    fake(tmp_path, 10, 1, "python", "python -m torch.distributed.run t.py", {"PATH": "/bin"},
         kids=(11, 12))  # fmt: skip
    fake(tmp_path, 11, 10, "python", "python t.py", {"RANK": "0", "HOME": "/root", "X": "y"})
    fake(tmp_path, 12, 10, "python", "python t.py", None)  # environ unreadable
    facts = {f.pid: f for f in tree_facts(10, str(tmp_path))}
    assert set(facts) == {10, 11, 12}
    assert facts[10].env == {} and facts[11].env == {"RANK": "0"} and facts[12].env is None
    assert facts[11].cmdline == "python t.py" and facts[11].ppid == 10


def test_known_processes_are_not_read_again_but_their_name_is(tmp_path):
    fake(tmp_path, 10, 1, "python", "python t.py", {"RANK": "0"})
    known = {(f.pid, f.start_ticks): f for f in tree_facts(10, str(tmp_path))}
    os.remove(tmp_path / "10" / "environ")
    fake_stat = (tmp_path / "10" / "stat").read_text().replace("(python)", "(pt_data_worker)")
    (tmp_path / "10" / "stat").write_text(fake_stat)
    (again,) = tree_facts(10, str(tmp_path), known)
    assert again.env == {"RANK": "0"} and again.comm == "pt_data_worker"


def test_a_huge_environment_is_read_up_to_the_bound(tmp_path):
    fake(tmp_path, 10, 1, "python", "python t.py", {"A": "x" * 100, "RANK": "1", "B": "y" * 100})
    assert read_environ(10, str(tmp_path), limit=1 << 20)["RANK"] == "1"
    cut = read_environ(10, str(tmp_path), limit=108)
    assert cut == {"A": "x" * 100}  # the cut entry is dropped, not misread
    assert read_environ(99, str(tmp_path)) is None


def test_an_environ_that_cannot_be_read_is_none(tmp_path):
    fake(tmp_path, 10, 1, "python", "python t.py", None)
    (tmp_path / "10" / "environ").mkdir()  # any OSError: denied, gone, not a file
    assert read_environ(10, str(tmp_path)) is None


def test_a_walk_of_main_threads_keeps_what_another_thread_started(tmp_path):
    import shutil

    fake(tmp_path, 10, 1, "python", "python t.py", {})
    (tmp_path / "10" / "task" / "11").mkdir()
    (tmp_path / "10" / "task" / "11" / "children").write_text("12")
    fake(tmp_path, 12, 10, "pt_data_worker", "python t.py", {})
    full = tree_facts(10, str(tmp_path))
    assert [f.pid for f in full] == [10, 12]
    assert [f.pid for f in tree_facts(10, str(tmp_path), main_only=True)] == [10]
    known = {(f.pid, f.start_ticks): f for f in full}
    assert [f.pid for f in tree_facts(10, str(tmp_path), known, main_only=True)] == [10, 12]
    shutil.rmtree(tmp_path / "12")  # it exits: not kept
    assert [f.pid for f in tree_facts(10, str(tmp_path), known, main_only=True)] == [10]


def test_a_walk_of_main_threads_leaves_a_workers_children_to_the_full_walk(tmp_path):
    """64 workers' children files are read by the full walk only; what it found is kept."""
    fake(tmp_path, 10, 1, "python", "python t.py", {}, kids=(11,))
    fake(tmp_path, 11, 10, "pt_data_worker", "python t.py", {}, kids=(12,))
    fake(tmp_path, 12, 11, "python", "python helper.py", {})
    assert [f.pid for f in tree_facts(10, str(tmp_path), main_only=True)] == [10, 11]
    full = tree_facts(10, str(tmp_path))
    assert [f.pid for f in full] == [10, 11, 12]
    known = {(f.pid, f.start_ticks): f for f in full}
    assert [f.pid for f in tree_facts(10, str(tmp_path), known, main_only=True)] == [10, 11, 12]
