"""A dump the user asked for (the full-dump key, the dump capture) tries again where py-spy's
nonblocking read lost a race with the running interpreter, and pauses the process only as the
last try; the errors a retry cannot mend are not retried."""

from __future__ import annotations

import os

from builders import MAIN, RACE, ScriptedSpy

from gputop.sources.stacks import StackSource


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


def test_the_full_dump_key_retries_where_the_live_view_backs_off():
    me = os.getpid()
    source = StackSource(me, spy=ScriptedSpy(RACE, None))
    source.tree = lambda: [(me, "main")]  # this test's own process, alone
    assert source.dump_all() == [(me, "main", [MAIN], None)]
    live = StackSource(me, spy=ScriptedSpy(RACE))
    live.tree = lambda: [(me, "main")]
    (proc,) = live.sample().processes
    assert proc.error == RACE.format(pid=me) and me in live._failures
