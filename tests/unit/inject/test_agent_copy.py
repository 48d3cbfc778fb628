"""The agent as self-contained code (gputop/inject/agent_copy.py, gputop/agent/boot.py): what
travels, that it loads in an interpreter that has no gputop at all, and that the folder it is
written to is private, never follows a planted link, and leaves nothing behind."""

from __future__ import annotations

import ast
import os
import re
import stat
import time
from pathlib import Path

import pytest

from gputop import __version__
from gputop.inject import agent_copy as ac
from gputop.inject.plan import MIN_VERSION

GPUTOP = Path(ac.__file__).resolve().parents[1]


def test_the_copy_is_the_agent_and_its_names_under_a_name_of_its_own():
    package, files = ac.contents()
    assert re.fullmatch(r"gputop_why_agent_[0-9a-f]{12}", package)
    assert {f"agent/{p.name}" for p in (GPUTOP / "agent").glob("*.py")} <= set(files)
    assert {f"vocab/{p.name}" for p in (GPUTOP / "vocab").glob("*.py")} <= set(files)
    assert f"__version__ = {__version__!r}" in files["__init__.py"].decode()
    for name, data in files.items():  # nothing in it names the installed package
        tree = ast.parse(data)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert not (node.module or "").startswith("gputop"), (name, node.module)
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("gputop") for a in node.names), name


@pytest.mark.parametrize(
    "path",
    [*sorted((GPUTOP / "agent").glob("*.py")), *sorted((GPUTOP / "vocab").glob("*.py")),
     GPUTOP / "inject" / "run_site.py"],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)  # fmt: skip
def test_what_runs_in_the_job_parses_with_the_oldest_supported_grammar(path):
    """CI checks the same files with vermin (.ci/run); this holds the grammar in the suite."""
    ast.parse(path.read_text(), feature_version=MIN_VERSION)


def test_usable_base_wants_a_sticky_or_private_folder_of_root_or_the_target():
    def st(mode: int, uid: int = 0) -> os.stat_result:
        return os.stat_result((stat.S_IFDIR | mode, 0, 0, 1, uid, 0, 0, 0, 0, 0))

    assert ac.usable_base(st(0o1777), 1000) is None  # /tmp
    assert ac.usable_base(st(0o700, 1000), 1000) is None  # the target's own
    assert ac.usable_base(st(0o777), 1000) == "others can write it and it is not sticky"
    assert ac.usable_base(st(0o1777, 2000), 1000) == "it belongs to uid 2000"
    assert ac.usable_base(os.stat_result((stat.S_IFREG | 0o644, *[0] * 9)), 0) == "not a folder"


def test_removal_never_follows_a_link_planted_in_the_copy(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    copy = ac.place_for(os.getpid(), os.getuid(), os.getgid(), {"TMPDIR": str(base)})
    (Path(copy.folder) / "link").symlink_to(keep)
    (Path(copy.folder) / ac.FAILED).symlink_to(keep / "precious")
    assert copy.failures() == {}  # a link is not a line to read
    copy.remove()
    copy.close()
    assert (keep / "precious").read_text() == "x" and list(base.iterdir()) == []


def test_a_failure_line_is_read_bounded_and_a_fifo_does_not_hang(tmp_path):
    copy = ac.place_for(os.getpid(), os.getuid(), os.getgid(), {"TMPDIR": str(tmp_path)})
    os.mkfifo(Path(copy.folder) / f"{ac.FAILED}-12")
    (Path(copy.folder) / f"{ac.FAILED}-13").write_text("E" * 10_000_000)
    (Path(copy.folder) / f"{ac.FAILED}-x").write_text("not a pid")
    t0 = time.monotonic()
    got = copy.failures()
    assert time.monotonic() - t0 < 5
    assert set(got) == {13} and len(got[13]) == ac.MAX_LINE
    copy.remove()
    copy.close()


def test_a_tmpdir_others_may_write_or_a_link_is_passed_over(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: another user could rename what is made there
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    for tmpdir in (shared, link):
        copy = ac.place_for(os.getpid(), os.getuid(), os.getgid(), {"TMPDIR": str(tmpdir)})
        assert not copy.folder.startswith(str(tmpdir)), copy.folder
        assert copy.folder.startswith(ac.TEMP_DIRS)
        copy.remove()
        copy.close()
    assert list(shared.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="handing files to another user needs root")
def test_as_root_the_copy_is_the_target_users_and_nobody_elses(tmp_path):
    tmp_path.chmod(0o1777)
    copy = ac.place_for(os.getpid(), 65534, 65534, {"TMPDIR": str(tmp_path)})
    folder = Path(copy.folder)
    for path in [folder, *folder.rglob("*")]:
        st = path.lstat()
        assert (st.st_uid, st.st_gid) == (65534, 65534), path
        assert stat.S_IMODE(st.st_mode) & 0o077 == 0, path
    copy.remove()
    copy.close()
    assert not folder.exists()


def test_the_copys_frames_are_gputops_not_the_jobs():
    from gputop.model.stack_stats import package, user_frame
    from gputop.model.stacks import Frame

    package_name = ac.contents()[0]
    by_pyspy = Frame("hook", f"/tmp/gputop-agent-1f/{package_name}/agent/auto.py", 10)
    by_agent = Frame("hook", f"{package_name}/agent/auto.py", 10)
    train = Frame("train", "train.py", 3)
    assert package(by_pyspy) == package(by_agent) == "gputop"
    assert user_frame([by_pyspy, by_agent, train]) == train


def test_a_gputop_run_python_without_an_agent_is_named_once_after_a_while(tmp_path):
    from gputop.sources.agent_link import EXPECT_S, AgentLink

    now = [1000.0]
    failures: dict[int | None, str] = {}
    me = os.getpid()  # a Python process with no agent socket anywhere
    link = AgentLink(me, pids=lambda: [me], directories=lambda: [tmp_path],
                     clock=lambda: now[0])  # fmt: skip
    link.expect_agents(lambda: failures)
    assert link.sample().problems == ()
    now[0] += EXPECT_S - 1
    assert link.sample().problems == ()  # still starting, perhaps
    now[0] += 2
    (line,) = link.sample().problems
    assert line.startswith(f"pid {me}: no agent after {EXPECT_S:g} s (started with -S, -I or -E")
    assert "without it the verdict has no steps" in line
    now[0] += 60
    assert link.sample().problems == ()  # said once
    other = AgentLink(me, pids=lambda: [me], directories=lambda: [tmp_path])
    other.expect_agents(lambda: {me: "ImportError: x"})
    (line,) = other.sample().problems  # a reason the copy left is said at once
    assert line.startswith(f"pid {me}: the agent did not start (ImportError: x): without it")
