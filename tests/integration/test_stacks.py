"""Live stacks of real processes the tests start, through the real py-spy."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from tests_support import as_nobody, sample_until

from gputop.sources.procfs import descendants
from gputop.sources.stacks import PySpy, StackSource, find_py_spy

pytestmark = [
    pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed"),
    pytest.mark.alone,  # shares of stack samples: a neighbour's CPU would move them
]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

THREADS = """
import queue, threading, time
q = queue.Queue()
def blocked():
    q.get()
def busy():
    while True:
        pass
def sleeper():
    while True:
        time.sleep(1)
for f in (blocked, busy, sleeper):
    threading.Thread(target=f, name=f.__name__, daemon=True).start()
print("ready", flush=True)
time.sleep(60)
"""


def start(args: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "GPUTOP_DISABLE": "1"},
        **kw,
    )


def stop(p: subprocess.Popen) -> None:
    """Kill the whole tree: torchrun's ranks do not all stay in the launcher's group."""
    for pid in reversed(descendants(p.pid)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)
    p.wait(10)


def phases(source: StackSource, n: int, every: float = 0.15, timeout: float = 30.0,
           of=None, thread=None, evidence: Counter | None = None) -> Counter:  # fmt: skip
    """Phases over n thread readings that landed (default: the target's main thread in the
    trainer's ``main``): a nonblocking py-spy read lost to a busy process is backed off for
    seconds while the sample keeps the process's last read, so each read (``taken``) counts
    once, not once per tick (counted per tick, one stale optimizer read made 3 of 8).
    ``evidence`` (if given) counts each phase with its deciding frame, for a failure's message."""
    of = of or (lambda proc: proc.pid == source.pid)
    thread = thread or in_training_main
    seen: Counter = Counter()
    counted: set[tuple[int, float | None]] = set()

    def enough(sample) -> bool:
        for proc in sample.processes:
            if of(proc) and (proc.pid, proc.taken) not in counted:
                counted.add((proc.pid, proc.taken))
                chosen = [t for t in proc.threads if thread(t)]
                seen.update(t.phase for t in chosen)
                if evidence is not None:
                    evidence.update(f"{t.phase} at {_where(t.deciding)}" for t in chosen)
        return sum(seen.values()) >= n

    sample_until(source, enough, timeout, every)
    return seen


def _where(frame) -> str:
    return "-" if frame is None else f"{Path(frame.file).name}:{frame.name}"


def in_training_main(thread) -> bool:
    """The example trainer's main thread once it runs ``main`` (not importing torch)."""
    return thread.name == "MainThread" and any(
        f.file.endswith("mlp_plain.py") and f.name == "main" for f in thread.frames
    )


def test_blocked_busy_and_sleeping_threads_are_told_apart():
    p = start([sys.executable, "-c", THREADS])
    try:
        assert p.stdout.readline().strip() == "ready"
        source = StackSource(p.pid)
        sample = sample_until(source, lambda s: s.processes and not s.processes[0].error)
        (proc,) = sample.processes
    finally:
        stop(p)
    by_name = {t.name: t for t in proc.threads}
    assert by_name["blocked"].phase == "blocked"
    assert by_name["blocked"].deciding.name in ("Condition.wait", "Queue.get")
    assert by_name["busy"].phase == "user code" and by_name["busy"].deciding.name == "busy"
    assert by_name["sleeper"].phase == "idle" and by_name["sleeper"].deciding.name == "sleeper"
    assert proc.error is None and proc.dump_s < 5


def trainer(*args: str) -> subprocess.Popen:
    """The example trainer, returned once it has taken its first steps: on CI's 2 busy cores
    torch's import and the first batches can take longer than any fixed sleep, and readings of
    a trainer still starting up are not the phases these tests look at."""
    # one intra-op thread: OpenMP threads fighting busy workers for 2 cores would make
    # backward the slow part (a real finding, but not what these tests look at)
    p = start([sys.executable, str(EXAMPLES / "mlp_plain.py"), "--steps", "100000", "--seconds",
               "40", "--threads", "1", "--sync-every", str(STEADY), *args])  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([p.stdout], [], [], deadline - time.monotonic())
        line = p.stdout.readline() if ready else ""
        if not line:
            break
        if line.startswith(f"step {2 * STEADY} "):
            return p
    stop(p)
    raise AssertionError(f"the trainer did not reach step {2 * STEADY} within 60 s")


STEADY = 3
"""The trainer prints every STEADY steps; readings start after its second print."""


def test_main_thread_waits_for_busy_workers():
    # 300 ms of transform per batch in each of 2 workers: a batch every ~150 ms against a
    # step of a few ms, so the main thread waits ~95% of the time even when a busy core makes
    # its step several times slower (at 80 ms it waited 3 of 8 readings once in 11 runs beside
    # a `yes` loop; at 300 ms it passed 20 of 20 runs beside one)
    p = trainer("--workers", "2", "--slow-transform-ms", "300")
    try:
        source = StackSource(p.pid)
        why: Counter = Counter()
        seen = phases(source, 8, evidence=why)
        workers = phases(source, 6, of=lambda proc: proc.role == "worker",
                         thread=lambda t: t.name == "MainThread")  # fmt: skip
    finally:
        stop(p)
    assert seen["data wait"] >= 6, why
    assert workers["fetch/transform"] >= 3, workers


def test_without_workers_the_transform_runs_in_the_main_thread():
    p = trainer("--workers", "0", "--slow-transform-ms", "80")
    try:
        seen = phases(StackSource(p.pid), 8)
    finally:
        stop(p)
    assert seen["fetch/transform"] >= 6, seen


def test_a_cpu_torch_loop_shows_forward_backward_and_optimizer():
    p = trainer("--batch", "256", "--hidden", "2048", "--dim", "1024", "--optimizer", "adam")
    try:
        seen = phases(StackSource(p.pid), 50, every=0.03, timeout=60)
    finally:
        stop(p)
    assert seen["forward"] >= 3 and seen["backward"] >= 3 and seen["optimizer"] >= 1, seen
    computing = seen["optimizer"] + seen["forward"] + seen["backward"]
    assert computing >= 0.7 * sum(seen.values()) and sum(seen.values()) >= 50, seen


def test_the_fast_rank_is_parked_in_all_reduce():
    torch = pytest.importorskip("torch")
    del torch
    launcher = start([sys.executable, "-m", "torch.distributed.run", "--standalone",
                      "--nproc-per-node", "2", str(EXAMPLES / "ddp_train.py"), "--slow-rank", "1",
                      "--slow-ms", "150", "--steps", "100000", "--seconds", "30"])  # fmt: skip
    try:
        source = StackSource(launcher.pid)
        # torch import, gloo rendezvous, and the first optimizer step's imports: the readings
        # below skip the first two by their frames; the last has no sign of its own to wait for
        time.sleep(10)  # pacing: the ranks' start-up, which the readings must not see
        ranks: dict[int, Counter] = {}
        counted: set[tuple[int, float | None]] = set()  # one read once, not once per tick
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(sum(c.values()) for c in ranks.values()) < 16:
            for proc in source.sample().processes:
                fresh = (proc.pid, proc.taken) not in counted
                counted.add((proc.pid, proc.taken))
                if fresh and proc.role == "rank" and proc.threads:  # the launcher's RANK
                    rank = proc.rank
                    if rank in (0, 1):
                        main = [
                            t
                            for t in proc.threads
                            if t.name == "MainThread"  # in the training loop, not starting up
                            and any(
                                f.file.endswith("ddp_train.py") and f.name == "main"
                                for f in t.frames
                            )
                            and not any("init_process_group" in f.name for f in t.frames)
                        ]
                        ranks.setdefault(rank, Counter()).update(t.phase for t in main)
            time.sleep(0.2)  # pacing: the ranks' stacks read five times a second
    finally:
        stop(launcher)
    assert set(ranks) == {0, 1}, ranks
    fast, slow = ranks[0], ranks[1]
    assert fast["collective wait"] >= 0.6 * sum(fast.values()), fast
    assert slow["collective wait"] <= 0.5 * sum(slow.values()), slow


def test_a_process_that_exits_between_dumps_is_dropped_quietly():
    p = start([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(1.0)"])
    assert p.stdout.readline().strip() == "ready"
    source = StackSource(p.pid)
    assert source.sample().processes
    p.wait(10)
    sample = source.sample()
    assert sample.processes == () and sample.problem is None


def test_missing_py_spy_is_one_message():
    absent = PySpy()
    absent.binary = None  # as when find_py_spy() finds nothing
    sample = StackSource(os.getpid(), spy=absent).sample()
    sample2 = StackSource(os.getpid(), spy=PySpy(binary="/nonexistent/py-spy")).sample()
    assert "py-spy is not installed" in sample.problem
    (proc,) = [p for p in sample2.processes if p.pid == os.getpid()]
    assert "cannot run py-spy" in proc.error


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
def test_ptrace_denied_becomes_an_instruction():
    base = Path(tempfile.mkdtemp(prefix="gputop-test-"))
    os.chmod(base, 0o755)
    binary = base / "py-spy"
    shutil.copy(find_py_spy(), binary)
    os.chmod(binary, 0o755)
    target = start([sys.executable, "-c", THREADS])  # owned by root
    try:
        assert target.stdout.readline().strip() == "ready"
        spy = PySpy(binary=str(binary))
        error = as_nobody(
            lambda: StackSource(target.pid, spy=spy).sample().processes[0].error or ""
        )
    finally:
        stop(target)
        shutil.rmtree(base, ignore_errors=True)
    assert "not allowed to read" in error and "ptrace_scope" in error and "SYS_PTRACE" in error


def test_a_child_that_is_not_python_is_no_error():
    """A `sleep` the job started has no Python stacks: nothing wrong, nothing to say."""
    code = "import subprocess; p = subprocess.Popen(['sleep', '30']); print('ready', flush=True); p.wait()"  # noqa: E501
    p = start([sys.executable, "-c", code])
    try:
        assert p.stdout.readline().strip() == "ready"
        source = StackSource(p.pid)
        sample = sample_until(source, lambda s: len(s.processes) == 2)
    finally:
        stop(p)
    child = next(x for x in sample.processes if x.pid != p.pid)
    assert child.error is None and child.threads == ()
