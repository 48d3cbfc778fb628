"""The suite's machine lock (tests/machine_lock.py): an ``alone`` test waits for the tests
running, and the tests that come after it wait for it. Each worker's side is a MachineLock of
its own (flock locks belong to an open file, so three in one process are three workers)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from machine_lock import MachineLock
from tests_support import until


def waiting(folder: Path) -> int:
    """How many flock requests on the lock's files the kernel holds back (/proc/locks marks a
    blocked request with "->")."""
    inodes = {str(os.stat(p).st_ino) for p in folder.iterdir()}
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for ln in lines if "->" in ln and ln.split()[6].rsplit(":", 1)[-1] in inodes)


def test_an_alone_test_waits_for_the_running_one_and_the_next_waits_for_it(tmp_path):
    first, alone, later = (MachineLock(tmp_path) for _ in range(3))
    first.hold("test_a", alone=False)
    order: list[str] = []

    def take(lock: MachineLock, name: str, is_alone: bool) -> None:
        lock.hold(name, alone=is_alone)
        order.append(name)

    t_alone = threading.Thread(target=take, args=(alone, "test_b", True))
    t_alone.start()
    until(lambda: waiting(tmp_path) == 1, timeout=10, what="the alone test held back")
    t_later = threading.Thread(target=take, args=(later, "test_c", False))
    t_later.start()
    until(lambda: waiting(tmp_path) == 2, timeout=10, what="the later test held back too")
    assert order == []

    first.release()
    until(lambda: order == ["test_b"], timeout=10, what="the alone test running")
    assert waiting(tmp_path) == 1  # the later test still waits, though the lock is shareable
    alone.release()
    t_alone.join(10)
    t_later.join(10)
    assert order == ["test_b", "test_c"]
    later.release()


def test_a_worker_keeps_the_lock_through_a_module_in_one_mode(tmp_path):
    mine, other = MachineLock(tmp_path), MachineLock(tmp_path)
    mine.hold("test_a", alone=True)
    mine.hold("test_a", alone=True)  # the next test of the module: no new request
    assert mine.held == ("test_a", True)
    got = threading.Event()
    t = threading.Thread(target=lambda: (other.hold("test_b", alone=False), got.set()))
    t.start()
    until(lambda: waiting(tmp_path) == 1, timeout=10, what="the other worker held back")
    mine.hold("test_a", alone=False)  # a shared test of the module: the lock is taken again
    until(got.is_set, timeout=10, what="both sharing")
    assert mine.held == ("test_a", False) and other.held == ("test_b", False)
    mine.release()
    other.release()
    t.join(10)
