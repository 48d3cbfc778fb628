"""Where agent sockets live and how a monitor decides a place is the target's (issue 17 item 2):
real directories, real sockets, a real /proc-shaped file for the kernel's socket list."""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pytest
from tests_support import as_nobody

from gputop.agent.paths import (
    UnsafeDirectory,
    bound_agent_sockets,
    open_private_dir,
    peer_credentials,
    serving_dir,
)
from gputop.model.steps import AgentsSample
from gputop.session import Session

ME = os.geteuid()


def private(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def test_a_private_directory_of_the_user_opens(tmp_path):
    fd = open_private_dir(private(tmp_path / "d"), ME)
    try:
        assert stat.S_ISDIR(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: (p.mkdir(), os.chmod(p, 0o755)), "open to other users (mode 755)"),
        (lambda p: p.symlink_to(private(p.with_name("real"))), "is a symlink"),
        (lambda p: p.write_text(""), "not a plain directory"),
    ],
)
def test_a_directory_that_is_not_the_users_alone_is_refused(tmp_path, make, says):
    d = tmp_path / "d"
    make(d)
    with pytest.raises(UnsafeDirectory, match=re.escape(says)):
        open_private_dir(d, ME)


def test_a_directory_of_another_user_is_refused(tmp_path):
    with pytest.raises(UnsafeDirectory, match=f"belongs to uid {ME}, not {ME + 1}"):
        open_private_dir(private(tmp_path / "d"), ME + 1)


def test_the_default_directory_taken_gives_a_fresh_private_one_and_says_why(tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir(mode=0o777)
    os.chmod(taken, 0o777)
    got, why = serving_dir(taken)
    try:
        assert got != taken and why is not None and str(taken) in why and "open to" in why
        st = os.lstat(got)
        assert st.st_uid == ME and stat.S_IMODE(st.st_mode) == 0o700
        assert got.name.startswith(f"gputop-{os.getuid()}-")
    finally:
        got.rmdir()
    mine = private(tmp_path / "mine")
    assert serving_dir(mine) == (mine, None)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as a second user (nobody)")
def test_a_directory_nobody_made_first_is_left_for_a_fresh_one():
    base = Path(tempfile.mkdtemp(prefix="gputop-squat-"))
    try:
        os.chmod(base, 0o1777)  # like /tmp
        squat = base / "gputop-0"
        assert as_nobody(lambda: os.mkdir(squat, 0o700) or "made") == "made"
        got, why = serving_dir(squat)
        got.rmdir()
        assert got != squat and f"{squat} belongs to uid" in (why or ""), why
    finally:
        shutil.rmtree(base, ignore_errors=True)


def net_unix(tmp_path: Path, body: str) -> str:
    root = tmp_path / "proc"
    (root / "7" / "net").mkdir(parents=True)
    head = "Num       RefCount Protocol Flags    Type St Inode Path\n"
    (root / "7" / "net" / "unix").write_text(head + body)
    return str(root)


def test_listening_agent_sockets_are_read_from_the_kernels_list(tmp_path):
    root = net_unix(
        tmp_path,
        "0000: 00000002 00000000 00010000 0001 01 11 /tmp/gputop-0-ab12/agent-123.sock\n"
        "0000: 00000003 00000000 00000000 0001 03 12 /tmp/gputop-0-ab12/agent-123.sock\n"
        "0000: 00000002 00000000 00010000 0001 01 13 /run/user/1000/gputop/agent-9.sock\n"
        "0000: 00000002 00000000 00010000 0001 01 14 /tmp/with space/agent-10.sock\n"
        "0000: 00000002 00000000 00010000 0001 01 15 @abstract/agent-11.sock\n"
        "0000: 00000002 00000000 00010000 0001 01 16 /tmp/other.sock\n"
        "0000: 00000002 00000000 00010000 0001 01 17\n"
        "garbage line agent-5.sock\n",
    )
    assert bound_agent_sockets(7, root) == {
        123: [Path("/tmp/gputop-0-ab12/agent-123.sock")],  # the connected end is not listed
        9: [Path("/run/user/1000/gputop/agent-9.sock")],
        10: [Path("/tmp/with space/agent-10.sock")],
    }
    assert bound_agent_sockets(8, root) == {}  # no such process: nothing, no error


def test_the_kernels_list_of_a_real_process_has_its_listening_socket(tmp_path):
    d = private(tmp_path / "d")
    path = d / f"agent-{os.getpid()}.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))
        s.listen(1)
        assert path in bound_agent_sockets(os.getpid()).get(os.getpid(), [])
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect(str(path))
            assert peer_credentials(c) == (os.getpid(), ME)


def test_a_refused_socket_is_one_line_of_the_session_once():
    line = "ignored /tmp/gputop-0/agent-5.sock: /tmp/gputop-0 belongs to uid 65534, not 0"
    s = Session(())
    s.agents(AgentsSample(target=5, t=1.0, wall=1.0, agents=(), problems=(line,)))
    s.agents(AgentsSample(target=5, t=2.0, wall=2.0, agents=(), problems=()))
    s.agents(AgentsSample(target=5, t=3.0, wall=3.0, agents=(), problems=(line,)))
    assert s.state.problems == (line,)
