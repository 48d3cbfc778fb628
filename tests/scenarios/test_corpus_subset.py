"""A few scripts of the verdict corpus (tests/corpus/) through the harness the verdict bench
runs them with (tests/corpus/harness.py): a healthy loop and a slow-but-moving job started by
`gputop diagnose -- CMD`, and a hang attached to by PID, all in this venv. The data-input
case (workers waiting on remote reads) runs from a separate install in both modes, with three more
(tests/integration/test_separate_install.py), among them torchrun_straggler attached by PID
with its cause (a rank's larger inputs) checked: it is not run again here.
straggler_cpu_shared stays in the bench: on two cores, a busy loop beside the test moves onto
rank 0's CPU too, and the two ranks then wait for each other (comms, seen in CI).
tokenize_in_getitem stays in the bench only: beside a busy core the job itself changes (torch's
two intra-op threads share a core with the busy loop, its backward grows to 91% of the step, the
data wait falls to 6%, under the 10% floor) and gpu-compute is then what the budget says.
Each asserts the final principal is one the scenario expects, and that no bound it must never
get was shown.

Select them with `-k corpus`; each watches its job for about 20 s.
"""

from __future__ import annotations

import sys

import pytest
from harness import Harness, unfit
from scenarios import by_name
from tests_support import note_timeline

from gputop.inject.debugger import find_debugger
from gputop.sources.stacks import find_py_spy

pytest.importorskip("torch")

WATCH_S = 16.0
"""A running scenario's watch. Under a busy core (tests/bench/margins.py over two CI runs) the
final verdict held from 3 s (healthy_mlp) and 7 s (slow_steps): 9 s of margin at the least."""
HANG_WATCH_S = 32.0
"""Attached 3 s after its start, the job stops at 8 s of its own clock (after ~2 s of
imports) and a hang is only a hang after 10 s of no progress: ~20 s, with margin for a busy
machine."""


corpus = Harness()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed"),
]

can_attach = pytest.mark.skipif(
    find_debugger() is None and sys.version_info < (3, 14),
    reason="attaching needs gdb or lldb (or Python 3.14's sys.remote_exec)",
)


def check(result, watched_s: float = WATCH_S) -> None:
    note_timeline([{"t_s": t, "bound": b} for t, b in result.timeline], watched_s)
    seen = " ".join(f"{t:.0f}s:{b}" for t, b in result.timeline) or result.problem
    assert result.final in result.scenario.expected, seen
    assert not result.never_seen, seen
    assert result.cause_right is not False, (result.cause, seen)  # the cause it is built with
    assert not unfit(result), (result.levers, result.setup)


def test_corpus_file_lock_hang_names_the_holder():
    """Started by gputop: the hang, and the process outside the job that holds the lock."""
    check(corpus.run_mode(by_name("hang_file_lock"), HANG_WATCH_S), HANG_WATCH_S)


def test_corpus_pipe_hang_names_the_dead_writer():
    """Started by gputop: the hang, read from the kernel (a pipe read) and the pipe's write
    ends (only the reader's own is left: its writer died)."""
    check(corpus.run_mode(by_name("hang_pipe_dead_writer"), HANG_WATCH_S), HANG_WATCH_S)


@pytest.mark.alone
@pytest.mark.parametrize("name", ["healthy_mlp", "slow_steps"])
def test_corpus_run_mode(name):
    check(corpus.run_mode(by_name(name), WATCH_S))


@can_attach
def test_corpus_hang_attached():
    check(corpus.attached_mode(by_name("hang_dead_producer"), HANG_WATCH_S), HANG_WATCH_S)
