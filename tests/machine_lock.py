"""Tests that judge real jobs by what they do with the CPU get the machine to themselves.

README's test command runs two pytest-xdist workers side by side (CI has two cores and the
suite uses about one on average). A test marked ``alone`` (a verdict of a real job, or a timing
such as a rate of reads) is judged as it was sized: beside at most the one busy core its margin
was measured against, never beside another test as well. So every test holds a readers-writer
lock over two private files while it runs: shared for an ordinary test, exclusive for an
``alone`` one. An ``alone`` test waiting for the lock holds the turnstile too, so that tests
arriving after it queue behind it (the kernel's ``flock`` favours no one, and a stream of short
tests on the other worker would starve it). A worker keeps the lock across consecutive tests of
one module in one mode: a module's fixture may keep a process running between its tests.

Without xdist (``pytest`` alone, ``-n 0``) tests run one by one and no lock is taken."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

DIR_KEY = "gputop_machine_lock"
"""The key of the lock's folder in each worker's ``workerinput`` (set by the controller)."""


class MachineLock:
    """One worker's side of the lock: which module and mode it holds it for."""

    def __init__(self, folder: Path) -> None:
        self._turnstile = _private_file(folder / "turnstile")
        self._lock = _private_file(folder / "machine")
        self.held: tuple[str, bool] | None = None
        """(module, alone) the lock is held for; None when not held."""

    def hold(self, module: str, alone: bool) -> None:
        """Held for a test of ``module``: kept when held for that module and mode already."""
        if self.held == (module, alone):
            return
        self.release()
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self.held = (module, alone)

    def release(self) -> None:
        if self.held is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self.held = None


def _private_file(path: Path) -> int:
    """A descriptor of a file in the controller's private folder (made by ``mkdtemp``: no other
    user can have put anything there)."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
