"""A process of the job blocked on a file lock another process holds, read by the real host
source from the real /proc/locks: the holder, its command line, and the file."""

from __future__ import annotations

import subprocess
import sys

from tests_support import until

from gputop.sources.host import HostSource

HOLD = """
import fcntl, sys, time
f = open(sys.argv[1], "w")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""
WAIT = "import fcntl, sys; fcntl.flock(open(sys.argv[1], 'w'), fcntl.LOCK_EX)"


def test_the_holder_of_the_lock_a_process_waits_for_is_named(tmp_path):
    lock = tmp_path / "cache.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    waiter = None
    try:
        assert holder.stdout.readline().strip() == "held"
        waiter = subprocess.Popen([sys.executable, "-c", WAIT, str(lock)])
        source = HostSource.open(waiter.pid)
        # its interpreter starts first
        waits = until(lambda: source.sample().lock_waits, timeout=30,
                      what="the waiter to reach flock")  # fmt: skip
        (w,) = waits
        assert (w.waiter, w.holder, w.kind) == (waiter.pid, holder.pid, "FLOCK")
        assert not w.holder_in_job and "import fcntl" in w.holder_cmd
        assert w.path == str(lock)
    finally:
        for p in (waiter, holder):
            if p is not None:
                p.kill()
                p.wait()
