"""/proc/locks read for the job's waits (``sources/locks.py``): the holder of each lock a
process of the job waits for, from lines that may be anything."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests_support import fuzz_examples

from gputop.model.shown import printable
from gputop.sources.locks import LockLine, blocked, lock_waits, parse_locks

LOCKS = """\
1: POSIX  ADVISORY  WRITE 300 fe:00:77 0 EOF
2: FLOCK  ADVISORY  WRITE 200 fe:00:4242 0 EOF
2: -> FLOCK  ADVISORY  WRITE 100 fe:00:4242 0 EOF
2: -> FLOCK  ADVISORY  WRITE 101 fe:00:4242 0 EOF
3: OFDLCK ADVISORY  READ  -1 08:01:9 0 EOF
3: -> OFDLCK ADVISORY  WRITE 102 08:01:9 0 EOF
"""


def test_each_waiter_is_paired_with_the_lock_it_waits_for():
    lines = parse_locks(LOCKS)
    assert lines[1] == LockLine(2, False, "FLOCK", 200, (0xFE, 0), 4242)
    waits = blocked(lines, {100, 102, 300})
    assert [(b.waiter, b.held.pid) for b in waits] == [(100, 200), (102, -1)]


def test_the_holder_is_named_with_its_command_and_whether_it_is_of_the_job():
    waits = lock_waits({100, 101, 102}, lambda pid: f"python helper.py --pid\x1b[2J{pid}",
                       LOCKS, proc="/nonexistent")  # fmt: skip
    first, second, ofd = waits
    assert (first.waiter, first.holder, first.holder_in_job) == (100, 200, False)
    assert first.holder_cmd == "python helper.py --pid?[2J200"  # no escape reaches a terminal
    assert first.path is None  # the waiter's files are not readable here
    assert second.waiter == 101
    assert ofd.holder is None and ofd.holder_cmd == ""  # an OFD lock has no owning process


def test_a_holder_of_the_job_is_said_to_be_of_the_job():
    (w,) = lock_waits({100, 200}, lambda pid: "python train.py", LOCKS.splitlines()[1] + "\n"
                      + LOCKS.splitlines()[2], proc="/nonexistent")  # fmt: skip
    assert w.holder_in_job


def test_a_long_command_line_is_cut():
    assert len(printable("x" * 10_000)) == 200


@settings(max_examples=fuzz_examples(300), deadline=None)
@given(st.text(max_size=2000))
def test_any_text_parses_without_raising(text):
    lines = parse_locks(text)
    assert all(isinstance(x, LockLine) for x in lines)
    lock_waits({1, 2, 3}, lambda pid: "", text, proc="/nonexistent")
