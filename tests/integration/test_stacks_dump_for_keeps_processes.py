"""A dump the user asked for is not tried again where py-spy was refused or the process has
exited. It starts a process so that a real pid has exited by the time it is read."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from builders import RACE, ScriptedSpy

from gputop.sources.stacks import explain

pytestmark = pytest.mark.slow

PTRACE = explain("Permission Denied", 1, 0).replace("pid 0's", "pid {pid}'s")


def test_a_refusal_or_an_exited_process_is_not_tried_again():
    spy, me = ScriptedSpy(PTRACE), os.getpid()
    assert spy.dump_for_keeps(me)[1] == PTRACE.format(pid=me)
    assert len(spy.calls) == 1
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    spy = ScriptedSpy(RACE)
    assert spy.dump_for_keeps(gone.pid)[1] == RACE.format(pid=gone.pid)
    assert len(spy.calls) == 1
