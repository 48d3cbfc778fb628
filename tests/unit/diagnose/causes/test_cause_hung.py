"""What a hung process waits for (``diagnose/causes/hung.py``): a child process, named with
its command line and whether it works."""

from __future__ import annotations

from builders import host_at
from builders import proc as a_proc

from gputop.diagnose import reduce_windows
from gputop.diagnose.causes.hung import CHILD_TIMEOUT, hung_cause
from gputop.model import Window
from gputop.model.host import ProcSample
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.sources.stack_phases import classify


def stacks(n: int = 12) -> Window:
    """The main thread of pid 100 in subprocess's wait, the same stack for n seconds."""
    frames = (
        Frame("Popen._try_wait", "subprocess.py", 2011),
        Frame("Popen.wait", "subprocess.py", 1264),
        Frame("preprocess", "train.py", 30),
        Frame("main", "train.py", 50),
    )
    phase, deciding = classify(frames, False)
    t = ThreadStack(100, "MainThread", False, frames, phase, deciding)
    samples = tuple(
        StacksSample(100, float(i), 0.0, (ProcessStacks(100, "main", (t,), taken=float(i)),))
        for i in range(n)
    )
    return Window(samples, 0.0, float(n))


def host(child_cpu: float) -> Window:
    def proc(pid: int, ppid: int, role: str, cmd: str, cpu: float) -> ProcSample:
        return a_proc(pid, role, name="python", ppid=ppid, cmdline=cmd, state="S",
                      cpu_cores=cpu, num_threads=1, threads_running=0)  # fmt: skip

    procs = (proc(100, 1, "main", "python train.py", 0.0),
             proc(300, 100, "child", "sleep 3600\x1b[2J", child_cpu))  # fmt: skip
    samples = tuple(host_at(t, procs) for t in range(0, 12, 2))
    return Window(samples, 0.0, 12.0)


def test_a_process_waiting_for_a_sleeping_child_names_it():
    cause = hung_cause(reduce_windows([], [], host=host(0.0), stacks=stacks()))
    assert cause is not None
    assert cause.text == (
        "pid 100 waits for its child pid 300 (sleep 3600?[2J), using no CPU: it waits itself"
    )
    assert cause.levers[-1] == CHILD_TIMEOUT


def test_a_working_child_is_said_to_work():
    cause = hung_cause(reduce_windows([], [], host=host(0.9), stacks=stacks()))
    assert cause is not None and "using 90% of a core: it works, slowly" in cause.text


def test_no_child_and_no_lock_is_no_cause():
    assert hung_cause(reduce_windows([], [], stacks=stacks())) is None
