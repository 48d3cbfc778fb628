"""Paths shared by tests (kept out of conftest so test modules can import them)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("GPUTOP_FIXTURES", REPO.parent / "shared" / "fixtures"))


def as_nobody(work) -> str:
    """Run ``work()`` (returning text) in a forked child that has become user ``nobody``, and
    return its text. Forking, not exec'ing: the interpreter may not be readable by nobody, and
    the code under test is already imported. Needs root."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            os.write(write_fd, work().encode())
        except BaseException:  # the test's assertion then shows what went wrong in the child
            import traceback

            os.write(write_fd, traceback.format_exc().encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    raw = b""
    try:
        while chunk := os.read(read_fd, 65536):
            raw += chunk
        os.waitpid(child, 0)
    finally:
        os.close(read_fd)
    return raw.decode()


@contextlib.contextmanager
def cpu_quota_cgroup(cpus: float):
    """A fresh cgroup limited to ``cpus`` CPUs; yields its ``cgroup.procs`` path, or None when
    this machine cannot make one (not root, no writable cpu controller). Removed afterwards."""
    from gputop.sources.cgroup import parse_mountinfo

    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    v1 = next((m for m in mounts if m.fstype == "cgroup" and "cpu" in m.options), None)
    v2 = next((m for m in mounts if m.fstype == "cgroup2"), None)
    made = None
    period = 100_000
    try:
        if v1 is not None:
            made = v1.point / f"gputop-test-{os.getpid()}"
            made.mkdir()
            (made / "cpu.cfs_period_us").write_text(str(period))
            (made / "cpu.cfs_quota_us").write_text(str(int(cpus * period)))
        elif v2 is not None:
            (v2.point / "cgroup.subtree_control").write_text("+cpu")
            made = v2.point / f"gputop-test-{os.getpid()}"
            made.mkdir()
            (made / "cpu.max").write_text(f"{int(cpus * period)} {period}")
    except OSError:
        if made is not None and made.is_dir():
            made.rmdir()
        made = None
    try:
        yield None if made is None else made / "cgroup.procs"
    finally:
        if made is not None:
            for _ in range(50):  # the members must have exited first
                try:
                    made.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
