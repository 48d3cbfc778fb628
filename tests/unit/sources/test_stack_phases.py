"""The classification table over stacks written from real torch 2.x dumps (tests/data)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gputop.model.stack_stats import (
    hottest_frames,
    outside_stdlib,
    stillness,
    thread_shares,
    user_frame,
    waits_in,
    worker_mains,
)
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.sources.stack_phases import classify
from gputop.sources.stacks import explain, parse_dump

CASES = json.loads((Path(__file__).parents[2] / "data" / "torch_stacks.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_torch_stacks_are_classified(case):
    frames = [Frame(name, file, None) for name, file in case["frames"]]
    phase, deciding = classify(frames, case["active"])
    assert phase == case["phase"]
    assert deciding is not None and deciding.name == case["deciding"]


def test_empty_stack_is_idle():
    assert classify([], False) == ("idle", None)


def test_py_spy_json_is_parsed_and_bad_entries_skipped():
    raw = json.dumps([
        {"pid": 1, "thread_id": 5, "os_thread_id": 7, "thread_name": "MainThread", "active": False,
         "frames": [{"name": "all_reduce", "line": 3,
                     "short_filename": "torch/distributed/distributed_c10d.py"}, "junk"]},
        "junk",
    ])  # fmt: skip
    (t,) = parse_dump(raw)
    assert (t.tid, t.name, t.phase, t.deciding.line) == (7, "MainThread", "collective wait", 3)


@pytest.mark.parametrize(
    ("stderr", "words"),
    [
        ("Permission Denied: Try running again with elevated permissions", "ptrace"),
        (
            "Failed to get process executable name.\n 0: Permission denied (os error 13)",
            "SYS_PTRACE",
        ),
        (
            "Failed to get process executable name.\n 0: No such file or directory (os error 2)",
            "has exited",
        ),
        ("Error: Failed to find python version from target process", "not a Python process"),
    ],
)
def test_errors_become_instructions(stderr, words):
    assert words in explain(stderr, 1, 42)
    assert "\n" not in explain(stderr, 1, 42)


def _sample(t: float, phase_frames: list[tuple[str, str, str]], pid: int = 10) -> StacksSample:
    threads = []
    for tid, (name, file, func) in enumerate(phase_frames):
        frames = (Frame(func, file, 1),)
        phase, deciding = classify(frames, False)
        threads.append(ThreadStack(tid, name, phase != "idle", frames, phase, deciding))
    return StacksSample(pid, t, t, (ProcessStacks(pid, "main", tuple(threads)),))


def test_shares_hot_frames_and_stillness():
    wait = ("MainThread", "torch/utils/data/dataloader.py", "_BaseDataLoaderIter.__next__")
    fwd = ("MainThread", "torch/nn/modules/module.py", "Module._call_impl")
    window = [_sample(i, [wait if i % 4 else fwd]) for i in range(8)]
    (s,) = thread_shares(window)
    assert dict(s.shares) == {"data wait": 0.75, "forward": 0.25}
    assert hottest_frames(window)[0][0].name == "_BaseDataLoaderIter.__next__"
    # waits of 3 dumps (2 s) between forwards, now 2 s into the next one; py-spy called the
    # thread active in them, so they are not pauses (work that sat on one line)
    (m,) = stillness(window)
    assert (m.still_s, m.dumps, m.before_s, m.phase) == (2.0, 3, None, "data wait")
    idle = [replace(x, processes=(replace(x.processes[0], threads=(replace(
        x.processes[0].threads[0], active=False),)),)) for x in window]  # fmt: skip
    assert stillness(idle)[0].before_s == 2.0
    ar = ("MainThread", "torch/distributed/distributed_c10d.py", "all_reduce")
    hung = [_sample(i, [ar]) for i in range(6)]
    (u,) = stillness(hung)
    assert (u.still_s, u.dumps, u.idle_share, u.before_s) == (5.0, 6, 0.0, None)  # "active"
    assert u.phase == "collective wait" and u.leaf.name == "all_reduce"


def _two_ranks(t: float, rank0: tuple[str, str, str]) -> StacksSample:
    ar = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 1),)
    waiting = ThreadStack(0, "MainThread", False, ar, *classify(ar, False))
    frames = (Frame(rank0[2], rank0[1], 1),)
    busy = ThreadStack(0, rank0[0], True, frames, *classify(frames, True))
    procs = (ProcessStacks(10, "rank", (busy,), rank=0), ProcessStacks(11, "rank", (waiting,)))
    return StacksSample(10, t, t, procs)


def test_stillness_per_rank_and_the_busy_share():
    save = ("MainThread", "torch/serialization.py", "save")
    busy, waiting = stillness([_two_ranks(i, save) for i in range(8)])
    assert (busy.pid, busy.rank, busy.idle_share, busy.still_s) == (10, 0, 0.0, 7.0)
    assert (waiting.pid, waiting.rank, waiting.idle_share) == (11, None, 1.0)
    moving = stillness([_two_ranks(i, ("MainThread", "train.py", f"f{i}")) for i in range(8)])
    assert moving[0].still_s == 0.0 and moving[0].dumps == 1


def test_the_wait_is_named_by_the_call_the_jobs_code_made():
    frames = (Frame("Condition.wait", "threading.py", 355), Frame("Queue.get", "queue.py", 180),
              Frame("fetch", "mylib/loader.py", 41), Frame("backward", "torch/_tensor.py", 600),
              Frame("train", "train.py", 12))  # fmt: skip
    t = ThreadStack(0, "MainThread", False, frames, *classify(frames, False))
    assert user_frame(frames) == frames[2] and waits_in(t) == frames[1]
    hook = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 3),
            Frame("hook", "gputop/agent/auto.py", 410), Frame("step", "train.py", 50))  # fmt: skip
    c = ThreadStack(0, "MainThread", False, hook, *classify(hook, False))
    assert user_frame(hook) == hook[2] and waits_in(c) == hook[0]  # the collective itself


def test_only_live_workers_are_reported():
    def sample(t: float, pids: tuple[int, ...]) -> StacksSample:
        frames = (Frame("_worker_loop", "torch/utils/data/_utils/worker.py", 1),)
        th = ThreadStack(0, "MainThread", False, frames, *classify(frames, False))
        return StacksSample(1, t, t, tuple(ProcessStacks(p, "worker", (th,)) for p in pids))

    # an epoch's workers exit and new ones start (persistent_workers=False)
    assert set(worker_mains([sample(0, (5, 6)), sample(1, (7, 8))])) == {7, 8}


def test_the_caller_outside_the_stdlib_is_the_users_frame():
    frames = (
        Frame("Condition.wait", "threading.py", 355),
        Frame("Event.wait", "threading.py", 655),
        Frame("read_shard", "train.py", 27),
        Frame("main", "train.py", 90),
    )
    assert outside_stdlib(frames) == Frame("read_shard", "train.py", 27)
    assert outside_stdlib(frames[:2]) is None
    assert outside_stdlib((Frame("get", "multiprocessing/queues.py", 1),)) is None


def test_every_phase_the_table_gives_is_in_the_shared_vocabulary():
    from gputop.sources.stack_phases import RULES
    from gputop.vocab.stacks import STACK_PHASES

    unknown = {phase for phase, _, _ in RULES} - set(STACK_PHASES)
    assert not unknown, f"add {sorted(unknown)} to gputop/vocab/stacks.py STACK_PHASES"


def test_a_thread_being_started_is_not_the_jobs_code():
    """Attached to a Lightning job, a thread seen in ``threading.py _set_ident`` (starting)
    was listed as "user code 100%"."""
    starting = [Frame("Thread._set_ident", "threading.py", 1020),
                Frame("Thread._bootstrap_inner", "threading.py", 1040),
                Frame("Thread._bootstrap", "threading.py", 1002)]  # fmt: skip
    assert classify(starting, True)[0] == "idle"
    working = [Frame("crunch", "train.py", 7), *starting[1:]]
    assert classify(working, True)[0] == "user code"
