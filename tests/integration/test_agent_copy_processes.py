"""The agent's self-contained copy loaded by a real Python that cannot import gputop, and a
copy that fails to start saying why in its folder. They start processes because the copy is
meant to be loaded by another interpreter, the job's."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.inject import agent_copy as ac

pytestmark = pytest.mark.slow


def _job(env: dict[str, str], cwd: Path, code: str) -> subprocess.Popen:
    """This Python with no site-packages (-S: gputop is not importable) running ``code``."""
    return subprocess.Popen([sys.executable, "-S", "-c", code], env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


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
