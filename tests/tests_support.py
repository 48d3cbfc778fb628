"""Paths shared by tests (kept out of conftest so test modules can import them)."""

from __future__ import annotations

import os
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
