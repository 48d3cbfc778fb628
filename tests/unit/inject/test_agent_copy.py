"""The agent as self-contained code (gputop/inject/agent_copy.py, gputop/agent/boot.py): what
travels, that it loads in an interpreter that has no gputop at all, and that the folder it is
written to is private, never follows a planted link, and leaves nothing behind."""

from __future__ import annotations

import ast
import os
import re
import stat
import subprocess
import sys
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


def _job(env: dict[str, str], cwd: Path, code: str) -> subprocess.Popen:
    """This Python with no site-packages (-S: gputop is not importable) running ``code``."""
    return subprocess.Popen([sys.executable, "-S", "-c", code], env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.slow  # starts a real process
def test_a_copy_loads_where_gputop_is_not_importable_and_removes_itself(tmp_path):
    runtime = tmp_path / "agents"
    runtime.mkdir(mode=0o700)
    env = {"PATH": os.environ["PATH"], "GPUTOP_DIR": str(runtime), "TMPDIR": str(tmp_path)}
    loop = (
        "import time\n"
        "try:\n    import gputop\nexcept ImportError:\n    print('no gputop', flush=True)\n"
        "time.sleep(60)\n"
    )
    job = _job(env, tmp_path, loop)  # the process whose file system the copy goes into
    try:
        assert job.stdout.readline() == "no gputop\n"
        copy = ac.place_for(job.pid, os.getuid(), os.getgid(), env)
        folder = Path(copy.folder)
        assert folder.parent == tmp_path and folder.name.startswith(ac.FOLDER_PREFIX)
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert (folder / ac.SCRIPT).is_file() and (folder / copy.package / "agent").is_dir()
        # what the debugger would queue, run by a Python that cannot import gputop either
        load = f"exec(open({str(folder / ac.SCRIPT)!r}).read())\n"
        load += "import sys; print(sys.modules['gputop.agent'].__name__)"
        out = subprocess.run([sys.executable, "-S", "-c", load], cwd=tmp_path, timeout=30,
                             env={**env, "GPUTOP_NO_SERVER": "1"}, capture_output=True,
                             text=True)  # fmt: skip
        assert out.stdout == f"{copy.package}.agent\n", out.stderr  # a script's markers reach it
        assert not folder.exists()  # loaded: the copy removed itself
        assert copy.failures() == {} and not copy.present()
        copy.close()
    finally:
        job.kill()
        job.wait()


@pytest.mark.slow  # starts a real process
def test_a_copy_that_cannot_start_says_why_in_its_folder_then_gputop_removes_it(tmp_path):
    copy = ac.place_for(os.getpid(), os.getuid(), os.getgid(), {"TMPDIR": str(tmp_path)})
    broken = Path(copy.folder) / copy.package / "agent" / "boot.py"
    broken.write_text("raise ImportError('\\x1b[31mred\\nand more')\n")
    out = subprocess.run([sys.executable, "-S", "-c", ac.load_code(copy.folder, copy.package)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 0 and "the agent did not start (ImportError:" in out.stderr
    assert copy.failures() == {None: "ImportError: ?[31mred and more"}  # no escape reaches a screen
    copy.remove()
    assert not copy.present() and list(tmp_path.iterdir()) == []
    copy.close()


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


@pytest.mark.slow  # starts a real process
def test_a_gputop_run_process_whose_agent_fails_is_named_with_its_reason(tmp_path, monkeypatch):
    """The run copy's sitecustomize (inject/run_site.py) leaves failed-<pid> where gputop reads
    it (``Job.agent_failures``, then ``AgentLink.expect_agents``), and the job starts anyway."""
    from gputop.run import child_env

    monkeypatch.setenv("GPUTOP_DIR", str(tmp_path / "runtime"))
    copy = ac.place_for_run()
    try:
        assert (Path(copy.folder) / ac.SITE).read_bytes() == ac.site_code()
        (Path(copy.folder) / copy.package / "agent" / "boot.py").write_text(
            "raise RuntimeError('no room')\n"
        )
        env = child_env(copy.folder, {"PATH": os.environ["PATH"]})
        out = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=30)  # fmt: skip
        pid = int(out.stdout)
        assert "gputop: the agent did not start (RuntimeError: no room)" in out.stderr
        assert copy.failures() == {pid: "RuntimeError: no room"}
    finally:
        copy.remove()
        copy.close()
    assert list((tmp_path / "runtime").iterdir()) == []


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
