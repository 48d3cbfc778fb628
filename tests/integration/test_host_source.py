"""The host source against real processes the tests start."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from tests_support import as_nobody, remove_cgroup

from gputop.model.roles import DATALOADER_WORKER
from gputop.sources.host import DENIED, HostSource
from gputop.sources.target import TargetNotFound

BUSY_THREADS = """
import hashlib, os, sys, threading
n = int(sys.argv[1])
os.sched_setaffinity(0, {0})
data = b"x" * (1 << 20)
def burn():
    while True:
        hashlib.sha256(data).digest()  # releases the GIL: really parallel threads
for _ in range(n):
    threading.Thread(target=burn, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

WORKERS = """
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None)
def name(comm):
    libc.prctl(15, comm.encode(), 0, 0, 0)  # PR_SET_NAME, as torch names DataLoader workers
kids = []
for i in range(3):
    pid = os.fork()
    if pid == 0:
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the parent
        name("pt_data_worker")
        if i == 0:
            while True:
                pass
        while True:
            time.sleep(1)
    kids.append(pid)
print("ready", flush=True)
try:
    signal.pause()
finally:
    for k in kids:
        os.kill(k, 9)
"""


def start(code: str, *args: str, **kw) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kw,
    )
    assert p.stdout.readline().strip() == "ready"
    return p


def stop(p: subprocess.Popen) -> None:
    """Kill the whole process group: forked workers must not outlive the test."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)
    p.wait(5)


def watch(pid: int, seconds: float = 2.0, **kw):
    src = HostSource.open(pid, thread_tier_s=0.5, **kw)
    sample = src.sample()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.5)  # pacing: the rates are measured over half a second between readings
        sample = src.sample()
    return sample


@pytest.mark.alone
def test_oversubscribed_threads_show_run_queue_wait():
    one = start(BUSY_THREADS, "1")
    try:
        base = watch(one.pid)
    finally:
        stop(one)
    eight = start(BUSY_THREADS, "8")
    try:
        busy = watch(eight.pid)
    finally:
        stop(eight)
    assert busy.effective_cpus == 1.0 and busy.effective_cpus_source == "CPU affinity"
    assert busy.runq_wait > base.runq_wait + 3.0, (busy.runq_wait, base.runq_wait)
    assert busy.runq_wait > 4.0
    assert busy.threads_running / busy.effective_cpus >= 4
    assert base.threads_running / base.effective_cpus <= 2
    assert busy.main.cpu_cores == pytest.approx(1.0, abs=0.35)
    assert busy.main.ctx_involuntary_rate > 0  # summed over every task, not the main thread


def test_dataloader_workers_are_found_and_the_spinning_one_uses_a_core():
    p = start(WORKERS)
    try:
        s = watch(p.pid, seconds=2.5)
    finally:
        stop(p)
    workers = s.workers
    assert len(workers) == 3
    assert all(w.name == DATALOADER_WORKER and w.ppid == p.pid for w in workers)
    spinning = max(workers, key=lambda w: w.cpu_cores)
    # in cores: a whole one on an idle machine, its share of one on a busy one (the rate over
    # the last 0.5 s, within what a loaded machine gives a spinning process)
    assert 0.2 < spinning.cpu_cores <= 1.15
    assert all(w.cpu_cores < 0.1 for w in workers if w is not spinning)
    assert s.main.role == "main" and s.main.cpu_cores < 0.1
    assert s.processes[0].role == "main"


@pytest.mark.alone
def test_an_idle_worker_is_read_less_often_than_a_busy_one():
    p = start(WORKERS)
    try:
        src = HostSource.open(p.pid, thread_tier_s=0.25)
        last: dict[int, object] = {}
        readings: dict[int, int] = {}
        end = time.monotonic() + 5.0
        while time.monotonic() < end:
            for w in src.sample().workers:
                if last.get(w.pid) is not w:  # a reading that stands is the same object
                    readings[w.pid] = readings.get(w.pid, 0) + 1
                    last[w.pid] = w
            time.sleep(0.05)  # pacing: readings asked for 20 times a second, over 5 s
    finally:
        stop(p)
    counts = sorted(readings.values())
    assert len(counts) == 3
    # the spinning worker every 0.25 s, the two sleeping ones every 1 s
    assert counts[-1] >= 2 * counts[1] and counts[1] <= 7, counts


SYSCALLS = """
import os, sys, tempfile, threading, time
path = os.path.join(tempfile.mkdtemp(), "f")
open(path, "wb").write(b"x" * 262144)
def read_small_files():  # what a loader of files does: open, read, close (256 KiB: the
    # copy is most of it, 61% kernel time on Linux 6.18 where 8-KiB files gave 30-37%)
    while True:
        with open(path, "rb") as f:
            f.read()
def compute():  # a transform: pure user-space work
    n = 0
    while True:
        n = (n * 31 + 7) % 1000003
target = read_small_files if sys.argv[1] == "read" else compute
threading.Thread(target=target, daemon=True).start()
print("ready", flush=True)
if sys.argv[2] == "wake":
    while True:
        time.sleep(0.005)  # the main thread wakes 200 times a second
threading.Event().wait()
"""


@pytest.mark.parametrize(
    ("work", "main"), [("read", "wake"), ("compute", "blocked")], ids=["reads", "computes"]
)
def test_kernel_time_and_the_main_threads_own_cpu_are_read(work, main):
    p = start(SYSCALLS, work, main)
    try:
        s = watch(p.pid, seconds=2.0)
    finally:
        stop(p)
    m = s.main
    share = m.kernel_cores / m.cpu_cores
    if work == "read":
        assert share > 0.4, (m.kernel_cores, m.cpu_cores)
    else:
        assert share < 0.2, (m.kernel_cores, m.cpu_cores)
    if main == "wake":
        assert m.main_thread_cores > 0.001, m.main_thread_cores
    else:  # blocked for good: not a nanosecond
        assert m.main_thread_cores < 0.0005, m.main_thread_cores


def test_target_that_exits_ends_in_the_exited_state():
    p = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(0.6); raise SystemExit(3)"]
    )
    src = HostSource.open(p.pid, exit_code=p.poll)
    assert src.sample().state == "running"
    p.wait(10)
    s = src.sample()
    assert s.state == "exited" and s.exit_code == 3 and s.processes == ()
    assert src.sample().state == "exited"  # and stays there, quietly


def test_missing_pid_is_a_clear_error():
    with pytest.raises(TargetNotFound, match="no process with PID 4000000"):
        HostSource.open(4_000_000)


def test_a_cpu_rate_is_never_taken_over_a_few_milliseconds():
    """stat counts 10-ms ticks: a busy process looked at twice within milliseconds (the first
    look at a target, then the first tick) read 0.00 cores, and the job was called idle."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        host = HostSource.open(busy.pid)
        host.sample()  # the first look
        assert host.sample().main.cpu_cores is None  # too soon to say, not "0.00"
        time.sleep(0.5)  # pacing: the span the rate is measured over (not a wait for a state)
        assert host.sample().main.cpu_cores > 0.1  # measured from the first look
    finally:
        busy.kill()
        busy.wait()


def test_reused_pid_is_a_new_process(tmp_path):
    proc = tmp_path / "proc"
    stat = "{pid} (python) S 1 1 1 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 {start} 1000 10 0\n"
    (proc / "77" / "task" / "77").mkdir(parents=True)
    (proc / "77" / "stat").write_text(stat.format(pid=77, start=100))
    src = HostSource.open(77, proc_root=proc)
    assert src.sample().state == "running"
    (proc / "77" / "stat").write_text(stat.format(pid=77, start=999))  # same PID, new process
    assert src.sample().state == "exited"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
def test_target_of_another_user_gives_reasons_not_a_crash():
    target = start(BUSY_THREADS, "1")  # owned by root

    def read() -> str:  # gputop's host source as another, unprivileged user
        src = HostSource.open(target.pid, thread_tier_s=0.2)
        for _ in range(3):
            time.sleep(0.3)  # pacing: three readings, each a rate over 0.3 s
            s = src.sample()
        return json.dumps({"na": dict(s.main.na), "env_na": dict(s.na), "cpu": s.main.cpu_cores,
                           "state": s.state, "runq": s.main.runq_wait})  # fmt: skip

    try:
        doc = json.loads(as_nobody(read))
    finally:
        stop(target)
    # what is readable still is: a busy thread's CPU, read (on 2 shared cores with a core kept
    # busy it measured 0.43, so the bar is that it works at all, not how much)
    assert doc["state"] == "running" and doc["cpu"] > 0.1
    assert doc["runq"] is not None
    assert doc["na"]["read_bytes_rate"] == DENIED
    assert doc["na"]["open_fds"] == DENIED
    assert doc["env_na"]["env"] == DENIED


def _v1_cpu_root() -> Path | None:
    root = Path("/sys/fs/cgroup/cpu")
    return root if (root / "cpu.cfs_quota_us").exists() and os.access(root, os.W_OK) else None


def _v2_root() -> Path | None:
    root = Path("/sys/fs/cgroup")
    ok = (root / "cgroup.subtree_control").exists() and os.access(root, os.W_OK)
    return root if ok and "cpu" in (root / "cgroup.subtree_control").read_text() else None


@pytest.mark.skipif(
    _v1_cpu_root() is None and _v2_root() is None, reason="may not create a cgroup here"
)
def test_real_cgroup_quota_throttles_a_busy_process():
    name = f"gputop-test-{uuid.uuid4().hex[:8]}"
    v1 = _v1_cpu_root()
    d = (v1 or _v2_root()) / name  # type: ignore[operator]
    d.mkdir()
    p = None
    try:
        if v1:
            (d / "cpu.cfs_period_us").write_text("100000")
            (d / "cpu.cfs_quota_us").write_text("30000")
        else:
            (d / "cpu.max").write_text("30000 100000")
        p = start(BUSY_THREADS, "2", preexec_fn=None)
        (d / "cgroup.procs").write_text(str(p.pid))
        s = watch(p.pid, seconds=2.5)
        assert s.cgroup is not None
        assert s.cgroup.cpu_quota_cpus == pytest.approx(0.3)
        assert s.effective_cpus == pytest.approx(0.3) and s.effective_cpus_source == "cgroup quota"
        assert s.cgroup.throttled_ratio > 0.5
        assert s.main.cpu_cores < 0.45
    finally:
        if p is not None:
            stop(p)
        remove_cgroup(d)


def _memory_cgroup_parent() -> Path | None:
    """Where this process may make a memory cgroup of its own (v1 or v2), or None."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            d = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return d if os.access(d, os.W_OK) else None
        if hid == "0" and controllers == "":
            d = Path("/sys/fs/cgroup") / path.lstrip("/")
            ok = (d / "cgroup.subtree_control").exists() and os.access(d, os.W_OK)
            return d if ok and "memory" in (d / "cgroup.subtree_control").read_text() else None
    return None


@pytest.mark.skipif(_memory_cgroup_parent() is None, reason="may not create a cgroup here")
def test_a_process_moved_into_another_cgroup_is_followed_within_a_tier():
    """A launcher (systemd-run, a SLURM task plugin, a bench's wrapper) may move the job
    after gputop first resolved its cgroup: the new cgroup's limit is read within a tier, not
    after the slow tier's 30 s."""
    parent = _memory_cgroup_parent()
    assert parent is not None
    d = parent / f"gputop-test-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    p = start("import time; print('ready', flush=True); time.sleep(60)")
    try:
        src = HostSource.open(p.pid, thread_tier_s=0.2)
        before = src.sample()
        limit = d / ("memory.max" if (d / "memory.max").exists() else "memory.limit_in_bytes")
        limit.write_text(str(512 << 20))
        (d / "cgroup.procs").write_text(str(p.pid))
        time.sleep(0.3)  # pacing: over one thread tier (0.2 s), the span to follow it within
        after = src.sample()
    finally:
        stop(p)
        remove_cgroup(d)
    assert before.cgroup is None or before.cgroup.mem_limit_bytes != 512 << 20
    assert after.cgroup is not None and after.cgroup.mem_limit_bytes == 512 << 20
