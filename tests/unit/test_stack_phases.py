"""The classification table over stacks written from real torch 2.x dumps (tests/data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop.model.stack_stats import (
    hottest_frames,
    outside_stdlib,
    thread_shares,
    unchanged_stacks,
    working_mains,
)
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.sources.stack_phases import classify
from gputop.sources.stacks import explain, parse_dump

CASES = json.loads((Path(__file__).parents[1] / "data" / "torch_stacks.json").read_text())["cases"]


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


def test_shares_hot_frames_and_unchanged_stacks():
    wait = ("MainThread", "torch/utils/data/dataloader.py", "_BaseDataLoaderIter.__next__")
    fwd = ("MainThread", "torch/nn/modules/module.py", "Module._call_impl")
    window = [_sample(i, [wait if i % 4 else fwd]) for i in range(8)]
    (s,) = thread_shares(window)
    assert dict(s.shares) == {"data wait": 0.75, "forward": 0.25}
    assert hottest_frames(window)[0][0].name == "_BaseDataLoaderIter.__next__"
    ar = ("MainThread", "torch/distributed/distributed_c10d.py", "all_reduce")
    hung = [_sample(i, [ar]) for i in range(6)]
    (u,) = unchanged_stacks(hung, min_samples=5)
    assert u.samples == 6 and u.phase == "collective wait" and u.parked.name == "all_reduce"
    assert unchanged_stacks(window, min_samples=5) == []


def _two_ranks(t: float, rank0: tuple[str, str, str]) -> StacksSample:
    ar = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 1),)
    waiting = ThreadStack(0, "MainThread", False, ar, *classify(ar, False))
    frames = (Frame(rank0[2], rank0[1], 1),)
    busy = ThreadStack(0, rank0[0], True, frames, *classify(frames, True))
    procs = (ProcessStacks(10, "rank", (busy,)), ProcessStacks(11, "rank", (waiting,)))
    return StacksSample(10, t, t, procs)


def test_a_rank_writing_a_checkpoint_is_working_while_the_other_waits():
    save = ("MainThread", "torch/serialization.py", "save")
    window = [_two_ranks(i, save) for i in range(8)]
    assert working_mains(window) == [(10, "checkpoint save")]
    assert [u.pid for u in unchanged_stacks(window)] == [11]


def test_a_spin_loop_in_user_code_is_not_working_but_moving_user_code_is():
    spin = ("MainThread", "train.py", "wait_for_file")
    assert working_mains([_two_ranks(i, spin) for i in range(8)]) == []
    moving = [_two_ranks(i, ("MainThread", "train.py", f"f{i}")) for i in range(8)]
    assert working_mains(moving) == [(10, "user code")]


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
