"""What the kernel says a parked thread waits in (``sources/syscalls.py``), read from real
processes: a pipe read and who holds the pipe's write end, a lock, a sleep; and a child that
exited but was not reaped is no process of the tree (``procfs.tree_facts``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tests_support import until, until_or_none

from gputop.model.stacks import pipe_read
from gputop.sources.procfs import tree_facts
from gputop.sources.syscalls import parse_syscall, pipe_writers, table, waits_in

pytestmark = pytest.mark.skipif(not table(), reason="no system call table for this machine")


def parked(pid: int, want: str, timeout: float = 10.0) -> str:
    """The main thread's kernel wait once it starts with ``want`` (a busy machine may take a
    while to start Python)."""
    got = ""

    def waits() -> bool:
        nonlocal got
        got = waits_in(pid, pid)
        return got.startswith(want)

    until_or_none(waits, timeout)  # a timeout: the caller's assertion says what it waits in
    return got


def child(code: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], **kw)


def test_a_pipe_read_names_the_pipe_and_its_writers():
    r, w = os.pipe()
    p = child(f"import os; os.read({r}, 1)", pass_fds=(r,))
    try:
        got = parked(p.pid, "read ")
        target = pipe_read(got)
        assert target == f"pipe:[{os.fstat(r).st_ino}]", got
        # this process keeps the write end; the reader has only the read end
        assert pipe_writers(target, [p.pid, os.getpid()]) == (os.getpid(),)
    finally:
        p.kill()
        p.wait()
        os.close(r)
        os.close(w)


def test_a_lock_taken_twice_waits_in_futex():
    p = child("import threading; lock = threading.Lock(); lock.acquire(); lock.acquire()")
    try:
        assert parked(p.pid, "futex") == "futex"
    finally:
        p.kill()
        p.wait()


def test_a_sleep_is_not_a_lock():
    p = child("import time; time.sleep(60)")
    try:
        got = parked(p.pid, "clock_nanosleep")
        assert got in ("clock_nanosleep", "nanosleep"), got
    finally:
        p.kill()
        p.wait()


def test_syscall_lines_that_say_nothing():
    calls = table("x86_64")
    assert parse_syscall("running", calls) is None
    assert parse_syscall("-1 0x7ffd 0x7f00", calls) is None
    assert parse_syscall("999 0x1 0x2", calls) is None
    assert parse_syscall("zz 0x1", calls) is None
    assert parse_syscall("0 0x5 0x7ffd 0x100 0x0 0x0 0x0 0x7ffd 0x7f00", calls) == ("read", 5)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_zombie_child_is_not_in_the_tree():
    code = ("import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'pass'])\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(60)\n")  # fmt: skip
    parent = child(code, stdout=subprocess.PIPE, text=True)
    try:
        kid = int(parent.stdout.readline())
        until(lambda: _state(kid) == "Z", timeout=15, what="the unreaped child to be a zombie")
        pids = [f.pid for f in tree_facts(parent.pid)]
        assert pids == [parent.pid]
    finally:
        parent.kill()
        parent.wait()


def peer_of_a_parked_reader(srv, connect: str):
    """A child that connects to ``srv`` (``connect``: its code, a socket ``s`` connected) and
    blocks reading it; what ``socket_peer`` says of its read, seen from the child and this
    process, and from the child alone."""
    from gputop.model.stacks import socket_read
    from gputop.sources.sockets import socket_peer

    srv.listen(1)
    p = child(f"import socket; {connect}; s.recv(1)")
    conn, _ = srv.accept()
    try:
        got = parked(p.pid, "recvfrom ")
        inode = socket_read(got)
        assert inode is not None, got
        return socket_peer(p.pid, inode, [p.pid, os.getpid()]), socket_peer(p.pid, inode, [p.pid])
    finally:
        p.kill()
        p.wait()
        conn.close()
        srv.close()


def test_a_tcp_read_names_the_process_at_the_other_end():
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    peer, _ = peer_of_a_parked_reader(srv, f"s = socket.create_connection(('127.0.0.1', {port}))")
    assert peer is not None and peer.address == f"127.0.0.1:{port}"
    assert peer.pid == os.getpid() and peer.on_host  # this process holds the other end


def test_a_unix_socket_read_names_the_process_at_the_other_end(tmp_path):
    """sock_diag gives the peer's inode (and the path the listener is bound to); the job's
    open files give the process that holds it."""
    import socket

    path = str(tmp_path / "labels.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    connect = f"s = socket.socket(socket.AF_UNIX); s.connect({path!r})"
    peer, alone = peer_of_a_parked_reader(srv, connect)
    assert peer is not None and peer.transport == "Unix", peer
    assert peer.address == path and peer.pid == os.getpid() and peer.on_host
    assert alone is not None and alone.pid is None  # held outside these processes
