"""The wait-for chain (``diagnose/causes/chain.py``): from the process a hung one waits for,
each next wait to its root: a lock held outside the job, a process that runs, a cycle."""

from __future__ import annotations

from builders import host_at
from builders import proc as a_proc

from gputop.diagnose import reduce_windows
from gputop.diagnose.causes.chain import DEADLOCK
from gputop.diagnose.causes.hung import hung_cause
from gputop.model import Window
from gputop.model.host import LockWait, ProcSample
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.sources.stack_phases import classify

READ = (Frame("read_labels", "train.py", 31), Frame("main", "train.py", 47))
PREP_READ = (Frame("next_shard", "prep.py", 12), Frame("main", "prep.py", 40))
PREP_LOCK = (Frame("acquire", "prep.py", 20), Frame("main", "prep.py", 40))


def thread(frames: tuple[Frame, ...], waits: str, writers=None) -> ThreadStack:
    phase, deciding = classify(frames, False)
    return ThreadStack(1, "MainThread", False, frames, phase, deciding, waits, writers)


def proc(pid: int, ppid: int, role: str, cmd: str, cpu: float) -> ProcSample:
    return a_proc(pid, role, name="python", ppid=ppid, cmdline=cmd, state="S", cpu_cores=cpu,
                  num_threads=1, threads_running=0)  # fmt: skip


def cause(main: ThreadStack, prep: ThreadStack, prep_cpu: float = 0.0, locks=()):
    procs = (proc(100, 1, "main", "python train.py", 0.0),
             proc(200, 100, "child", "python prep.py", prep_cpu))  # fmt: skip
    host = Window(tuple(host_at(t, procs, lock_waits=locks) for t in range(0, 14, 2)), 0.0, 14.0)
    reads = tuple(
        StacksSample(100, float(i), 0.0, (ProcessStacks(100, "main", (main,), taken=float(i)),
                                          ProcessStacks(200, "child", (prep,), taken=float(i))))
        for i in range(14)
    )  # fmt: skip
    stacks = Window(reads, 0.0, 14.0)
    return hung_cause(reduce_windows([], [], host=host, stacks=stacks))


def test_a_writer_blocked_on_a_lock_held_outside_the_job_is_followed_to_the_holder():
    lock = LockWait(200, "FLOCK", 300, "python warm_cache.py", False, "/data/cache.lock")
    c = cause(thread(READ, "read pipe:[77]", (100, 200)), thread(PREP_LOCK, "flock"), locks=(lock,))
    assert c is not None
    assert c.text.startswith("pid 100 waits to read pipe:[77] from pid 200 (python prep.py)")
    assert c.text.endswith(
        "; pid 200 (python prep.py) waits for a FLOCK file lock on /data/cache.lock held by pid "
        "300 (python warm_cache.py), outside the job, which keeps it"
    ), c.text
    assert c.levers[0].startswith("end or fix pid 300 (python warm_cache.py): it holds the lock")


def test_two_processes_reading_each_others_pipe_are_a_deadlock_with_every_link():
    c = cause(thread(READ, "read pipe:[77]", (100, 200)), thread(PREP_READ, "read pipe:[78]",
                                                                 (100, 200)))  # fmt: skip
    assert c is not None
    assert c.text.endswith(
        "; pid 200 (python prep.py) waits to read pipe:[78] from pid 100 (python train.py); "
        "a deadlock: pid 100 -> pid 200 -> pid 100"
    ), c.text
    assert c.levers[0] == DEADLOCK


def test_a_chain_that_ends_at_a_process_that_runs_says_so():
    c = cause(thread(READ, "read pipe:[77]", (100, 200)), thread(PREP_READ, ""), prep_cpu=0.97)
    assert c is not None and "it writes nothing" in c.text
    assert "; " not in c.text.split("it writes nothing")[1]  # no edge out of a running writer
