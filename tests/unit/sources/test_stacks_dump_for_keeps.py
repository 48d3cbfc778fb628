"""A dump the user asked for (the full-dump key, the dump capture) tries again where py-spy's
nonblocking read lost a race with the running interpreter, and pauses the process only as the
last try; the errors a retry cannot mend are not retried."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gputop.model.stacks import Frame, ThreadStack
from gputop.sources.stacks import PySpy, StackSource, explain

RACE = explain("Error: Failed to get stack traces", 1, 0).replace(" 0:", " {pid}:")
PTRACE = explain("Permission Denied", 1, 0).replace("pid 0's", "pid {pid}'s")
MAIN = ThreadStack(1, "MainThread", True, (Frame("main", "job.py", 3),), "user code", None)


class ScriptedSpy(PySpy):
    """py-spy's answers in order, and the calls made (pid, blocking)."""

    def __init__(self, *answers: str | None) -> None:
        super().__init__(binary=sys.executable)  # never run: dump is replaced
        self.answers = list(answers)
        self.calls: list[tuple[int, bool]] = []

    def dump(self, pid: int, blocking: bool = False, native: bool = False):
        self.calls.append((pid, blocking))
        error = self.answers.pop(0)
        if error is None:
            return [MAIN], None
        return None, error.format(pid=pid)


def test_a_lost_race_is_read_on_the_second_nonblocking_try():
    spy, me = ScriptedSpy(RACE, None), os.getpid()
    assert spy.dump_for_keeps(me) == ([MAIN], None, "")
    assert spy.calls == [(me, False), (me, False)]


def test_after_two_lost_races_one_paused_read_and_the_dump_says_so():
    spy, me = ScriptedSpy(RACE, RACE, None), os.getpid()
    threads, error, note = spy.dump_for_keeps(me)
    assert (threads, error) == ([MAIN], None)
    assert note == "read while paused (nonblocking reads failed)"
    assert spy.calls == [(me, False), (me, False), (me, True)]


def test_every_try_failing_gives_the_last_error():
    spy, me = ScriptedSpy(RACE, RACE, RACE), os.getpid()
    assert spy.dump_for_keeps(me) == (None, RACE.format(pid=me), "")
    assert len(spy.calls) == 3


@pytest.mark.slow  # starts a real process
def test_a_refusal_or_an_exited_process_is_not_tried_again():
    spy, me = ScriptedSpy(PTRACE), os.getpid()
    assert spy.dump_for_keeps(me)[1] == PTRACE.format(pid=me)
    assert len(spy.calls) == 1
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    spy = ScriptedSpy(RACE)
    assert spy.dump_for_keeps(gone.pid)[1] == RACE.format(pid=gone.pid)
    assert len(spy.calls) == 1


def test_the_full_dump_key_retries_where_the_live_view_backs_off():
    me = os.getpid()
    source = StackSource(me, spy=ScriptedSpy(RACE, None))
    source.tree = lambda: [(me, "main")]  # this test's own process, alone
    assert source.dump_all() == [(me, "main", [MAIN], None)]
    live = StackSource(me, spy=ScriptedSpy(RACE))
    live.tree = lambda: [(me, "main")]
    (proc,) = live.sample().processes
    assert proc.error == RACE.format(pid=me) and me in live._failures
