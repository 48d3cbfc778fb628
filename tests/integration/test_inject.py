"""Loading the agent into running processes on this machine's Python through the debugger path
(gdb): a plain trainer with no gputop code gets an agent whose steps the monitor reads; every
refusal is one line that says what to do; the target keeps running on every path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests_support import REPO, as_nobody, kill_tree, short_dir, until

from gputop.inject import debugger as dbg
from gputop.inject import load_agent, plan_load
from gputop.inject.agent_copy import load_code, place_for
from gputop.sources.agent_link import AgentLink
from gputop.sources.host import HostSource
from gputop.sources.procfs import children_of

DEBUGGER = (dbg.find_debugger() or ("gdb", ""))[0]
"""The debugger this machine loads the agent with (lldb first on a CPU with AMX state)."""
pytestmark = pytest.mark.skipif(
    dbg.find_debugger() is None or sys.platform != "linux", reason="needs gdb or lldb on Linux"
)

LOOP = (
    "import sys, time\nsys.stderr.write('ready\\n')\nsys.stderr.flush()\n"
    "while True:\n    time.sleep(0.005)\n"
)


def state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2]


def running(proc: subprocess.Popen) -> bool:
    """Still there and not stopped (T)."""
    return proc.poll() is None and state(proc.pid) != "T"


def start(argv: list[str], env: dict[str, str], agent_dir: Path) -> subprocess.Popen:
    """``argv`` with its agent socket in ``agent_dir`` and its temporary files (where the
    agent's copy goes) in ``tmp`` beside it."""
    tmp = agent_dir.parent / "tmp"
    tmp.mkdir(mode=0o700, exist_ok=True)
    proc = subprocess.Popen(
        argv, env={**env, "GPUTOP_DIR": str(agent_dir), "TMPDIR": str(tmp)},
        cwd=agent_dir.parent,  # not the checkout: ``-c`` would import gputop from the cwd
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return proc


def ended(proc: subprocess.Popen) -> str:
    """How the process ended and the end of what it said, or that it still runs."""
    if proc.poll() is None:
        return f"pid {proc.pid} still runs ({state(proc.pid)})"
    return f"pid {proc.pid} ended with {proc.returncode}: {proc.stderr.read()[-2000:]}"


def wait_ready(proc: subprocess.Popen) -> None:
    """Until the program says it runs (the interpreter is up and in its loop)."""
    line = proc.stderr.readline()
    assert line == "ready\n", line + proc.stderr.read()


def ready(code: str, agent_dir: Path) -> subprocess.Popen:
    """This Python running ``code``, once it has written its ready line."""
    proc = start([sys.executable, "-c", code], dict(os.environ), agent_dir)
    wait_ready(proc)
    return proc


def stop(proc: subprocess.Popen) -> None:
    """Kill the target and any children it made (tests_support.kill_tree)."""
    kill_tree(proc)


@pytest.fixture
def agent_dir():
    with short_dir("gputop-inject-") as base:  # the job's $TMPDIR is beside it (``start``)
        d = base / "agents"
        d.mkdir(mode=0o700)
        yield d


def plain_loop(agent_dir: Path, *flags: str, exe: str = sys.executable, env=None):
    proc = start([exe, *flags, "-c", LOOP], env if env is not None else dict(os.environ),
                 agent_dir)  # fmt: skip
    wait_ready(proc)
    return proc


def test_a_plain_trainer_gets_an_agent_and_the_monitor_reads_its_steps(agent_dir):
    trainer = start(
        [sys.executable, str(REPO / "examples" / "mlp_plain.py"), "--steps", "100000",
         "--threads", "1", "--workers", "1"],
        {**os.environ, "PYTHONWARNINGS": "ignore"}, agent_dir,
    )  # fmt: skip
    try:
        host = HostSource.open(trainer.pid)
        # torch imported, the loader's worker started
        until(lambda: trainer.poll() is not None or host.sample().workers, timeout=90,
              what="the loader's worker")  # fmt: skip
        assert trainer.poll() is None, trainer.stderr.read()
        roles = {p.pid: p.role for p in host.sample().processes}
        plan = plan_load(trainer.pid, roles)
        assert [p.pid for p in plan.todo] == [trainer.pid], plan.lines()  # not the worker
        assert DEBUGGER in plan.lines()[0] and "pending call" in plan.lines()[0]
        report = load_agent(plan, wait_s=30)
        assert report.ok, report.line()
        assert report.line() == f"agent loaded into pid {trainer.pid}"
        assert running(trainer)
        link = AgentLink(trainer.pid)

        def three_steps() -> tuple | None:
            got = link.sample().agents
            return got if got and len(got[0].steps) >= 3 else None

        agents = until(three_steps, timeout=30, what=f"three steps ({ended(trainer)})")
        step = agents[0].steps[-1]
        assert step.phases.get("optimizer", 0) > 0 and step.phases.get("data_wait", 0) > 0
        link.close()
        again = plan_load(trainer.pid, roles)
        assert again.nothing_to_do and again.summary().endswith("nothing to do")
    finally:
        stop(trainer)


def asleep(pid: int) -> bool:
    """The process sleeps in the kernel (its one thread in a C call such as clock_nanosleep)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] == "S"


def test_a_main_thread_in_a_long_c_call_gets_the_agent_when_it_returns(agent_dir):
    code = "import sys, time\nsys.stderr.write('ready\\n')\nsys.stderr.flush()\ntime.sleep(3)\n"
    proc = start([sys.executable, "-c", code + "time.sleep(60)"], dict(os.environ), agent_dir)
    try:
        wait_ready(proc)
        until(lambda: asleep(proc.pid), what="the main thread inside its first sleep")
        report = load_agent(plan_load(proc.pid), wait_s=0.5)
        assert report.waiting and not report.problems, report.line()
        assert "inside a C call (clock_nanosleep" in report.line()
        assert "starts when it returns to Python" in report.line()
        assert running(proc)
        sock = agent_dir / f"agent-{proc.pid}.sock"  # served once the first sleep returned
        until(sock.exists, timeout=15, what="the agent's socket")
    finally:
        stop(proc)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become a second user (nobody)")
def test_another_user_is_refused_in_one_line_and_the_target_runs_on(agent_dir):
    proc = plain_loop(agent_dir)
    try:
        out = as_nobody(lambda: "\n".join(plan_load(proc.pid).lines()))
        assert out.count("\n") == 0, out
        assert f"pid {proc.pid} belongs to uid 0, not you" in out
        assert "run gputop as that user or as root" in out
        forced = as_nobody(
            lambda: str(dbg.run_debugger(dbg.find_debugger(), proc.pid, "pass").problem)
        )
        assert f"ptrace denied for pid {proc.pid}" in forced and "\n" not in forced, forced
        assert running(proc)
    finally:
        stop(proc)


def test_a_target_without_gputop_in_its_environment_gets_the_monitors_agent(agent_dir):
    """The base interpreter (not gputop's venv) cannot import gputop; with -S not even its
    site-packages: the copy needs neither, and leaves nothing in the target's TMPDIR."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    for flags in ((), ("-S",)):
        proc = plain_loop(agent_dir, *flags, exe=base, env=env)
        try:
            cannot = subprocess.run([base, *flags, "-c", "import gputop"], env=env, cwd="/",
                                    capture_output=True)  # fmt: skip
            if cannot.returncode == 0:
                pytest.skip("gputop is installed in the base interpreter too")
            plan = plan_load(proc.pid)
            assert [p.pid for p in plan.todo] == [proc.pid], plan.lines()
            assert not any("pip install" in line for line in plan.lines())
            report = load_agent(plan, wait_s=30)
            assert report.ok, report.line()
            assert running(proc)
            assert list((agent_dir.parent / "tmp").iterdir()) == []  # the copy removed itself
        finally:
            stop(proc)


def test_no_debugger_says_how_to_install_one(agent_dir):
    proc = plain_loop(agent_dir)
    try:
        plan = plan_load(proc.pid, path="/nonexistent")
        assert plan.summary() == "no debugger to load the agent with: apt-get install gdb " \
            "(or your system's package of gdb or lldb)"  # fmt: skip
        assert load_agent(plan).line() == f"pid {proc.pid}: {plan.summary()}"
        assert running(proc)
    finally:
        stop(proc)


def gputop(*args: str, agent_dir: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, "GPUTOP_DIR": str(agent_dir), **env}, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_diagnose_says_no_without_attach_and_loads_with_it(agent_dir):
    proc = plain_loop(agent_dir)
    try:
        out = gputop("diagnose", "--pid", str(proc.pid), "--duration", "0.5", agent_dir=agent_dir)
        assert out.returncode == 0, out.stderr
        said = [ln for ln in out.stderr.splitlines() if "agent" in ln and "watching" not in ln]
        line = (
            f"pid {proc.pid} has no gputop agent: without it the verdict has no steps, no "
            "eval/GC/checkpoint/log slices, no per-rank budgets; add --attach to load it "
            "without a restart"
        )
        assert said == [f"gputop: {line}"], out.stderr
        assert f"note: {line}" in out.stdout  # the diagnosis says it too, not just stderr
        assert not (agent_dir / f"agent-{proc.pid}.sock").exists()
        out = gputop("diagnose", "--pid", str(proc.pid), "--duration", "0.5", "--attach",
                     agent_dir=agent_dir, PATH="/nonexistent")  # fmt: skip
        assert out.returncode == 0, out.stderr  # no gdb on PATH: one line, the job untouched
        assert f"gputop: pid {proc.pid}: no debugger to load the agent with: apt-get install " \
            "gdb" in out.stderr  # fmt: skip
        assert not (agent_dir / f"agent-{proc.pid}.sock").exists() and running(proc)
        out = gputop("diagnose", "--pid", str(proc.pid), "--duration", "0.5", "--attach",
                     agent_dir=agent_dir)  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert f"{DEBUGGER} stops it for a moment" in out.stderr
        assert f"gputop: agent loaded into pid {proc.pid}\n" in out.stderr
        assert running(proc)
        out = gputop("record", "--pid", str(proc.pid), "-o", str(agent_dir.parent / "r.gputop"),
                     "--duration", "0.5", "--attach", agent_dir=agent_dir)  # fmt: skip
        assert "gputop: the agent is already loaded: nothing to do\n" in out.stderr, out.stderr
    finally:
        stop(proc)


@pytest.mark.parametrize("command", [[], ["diagnose"], ["record"]])
def test_help_explains_attach(command, capsys):
    from gputop.cli import main

    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--attach" in text and "sys.remote_exec" in text and "ptrace" in text


def other_pythons() -> dict[tuple[int, int], str]:
    """Other CPython versions on this machine (pyenv's, the system's), by version."""
    import glob
    import re

    found: dict[tuple[int, int], str] = {}
    for exe in sorted(glob.glob("/root/.pyenv/versions/*/bin/python3.*")
                      + glob.glob("/usr/bin/python3.*")):  # fmt: skip
        m = re.fullmatch(r".*/python(\d)\.(\d+)", exe)
        if m and os.access(exe, os.X_OK):
            found.setdefault((int(m.group(1)), int(m.group(2))), exe)
    found.pop(sys.version_info[:2], None)
    return found


@pytest.mark.parametrize("version", [(3, 10), (3, 12), (3, 13)], ids=lambda v: f"{v[0]}.{v[1]}")
def test_other_python_versions_get_the_agent_through_the_same_pending_call(version, agent_dir):
    exe = other_pythons().get(version)
    if exe is None:
        pytest.skip(f"no Python {version[0]}.{version[1]} here")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = plain_loop(agent_dir, exe=exe, env=env)  # no gputop there: the copy, stdlib only
    try:
        report = load_agent(plan_load(proc.pid), wait_s=15)
        assert report.ok, report.line()
        assert running(proc)
    finally:
        stop(proc)


def test_a_python_older_than_the_agent_is_refused(agent_dir):
    old = next((exe for v, exe in sorted(other_pythons().items()) if v < (3, 10)), None)
    if old is None:
        pytest.skip("no Python older than 3.10 here")
    proc = plain_loop(agent_dir, exe=old, env=dict(os.environ))
    try:
        (line,) = plan_load(proc.pid).lines()
        assert "gputop's agent needs 3.10 or newer" in line
        assert running(proc)
    finally:
        stop(proc)


def test_every_python_process_below_the_target_gets_one_too(agent_dir):
    parent = (
        "import subprocess, sys, time\n"
        f"kids = [subprocess.Popen([sys.executable, '-c', {LOOP!r}], stderr=subprocess.PIPE)"
        " for _ in range(2)]\n"
        "for k in kids:\n    k.stderr.readline()\n"
        "sys.stderr.write('ready\\n')\nsys.stderr.flush()\n"
        "while True:\n    time.sleep(0.005)\n"
    )
    proc = ready(parent, agent_dir)
    try:
        kids = children_of(proc.pid)
        roles = {p.pid: p.role for p in HostSource.open(proc.pid).sample().processes}
        plan = plan_load(proc.pid, roles)
        assert sorted(p.pid for p in plan.todo) == sorted([proc.pid, *kids])
        report = load_agent(plan, wait_s=15)
        assert report.loaded == tuple(sorted([proc.pid, *kids])), report.line()
        assert running(proc)
    finally:
        stop(proc)


def stub_interpreter(tmp_path: Path, stderr: str, code: int) -> str:
    """A stand-in for a 3.14 interpreter's ``sys.remote_exec`` helper: prints, exits."""
    stub = tmp_path / "python3.14"
    stub.write_text(f"#!/bin/sh\necho '{stderr}' >&2\nexit {code}\n")
    stub.chmod(0o755)
    return str(stub)


@pytest.fixture
def scripts(agent_dir) -> Path:
    """Where the 3.14 path's script lies: in the agent's copy, in the target's TMPDIR
    (``start`` gives each target one, beside ``agent_dir``)."""
    return agent_dir.parent / "tmp"


def test_a_target_refusing_remote_exec_falls_back_to_the_debugger(agent_dir, tmp_path, scripts):
    from dataclasses import replace

    from gputop.inject import LoadPlan

    proc = plain_loop(agent_dir)
    try:
        real = plan_load(proc.pid)
        (p,) = real.todo
        refusing = stub_interpreter(
            tmp_path, "RuntimeError: Remote debugging is not enabled in the remote process", 1
        )
        as_314 = replace(p, method="remote_exec", target=replace(p.target, path=refusing))
        said: list[str] = []
        report = load_agent(LoadPlan(proc.pid, (as_314,), real.debugger), progress=said.append)
        assert report.ok, report.line()
        assert said == [
            f"loading the agent into pid {proc.pid} (remote_exec)",
            f"pid {proc.pid} refuses remote execution: trying {DEBUGGER}",
        ]
        assert running(proc)
        assert not list(scripts.iterdir()), "the copy was left on disk"
    finally:
        stop(proc)


def test_remote_exec_scheduled_but_never_run_says_so_and_leaves_nothing(
    agent_dir, tmp_path, scripts
):
    from dataclasses import replace

    from gputop.inject import LoadPlan

    proc = plain_loop(agent_dir)
    try:
        real = plan_load(proc.pid)
        (p,) = real.todo
        silent = stub_interpreter(tmp_path, "", 0)  # "scheduled", but nothing will run it
        as_314 = replace(p, method="remote_exec", target=replace(p.target, path=silent))
        report = load_agent(LoadPlan(proc.pid, (as_314,), None), wait_s=0.3)
        assert report.line().startswith(f"pid {proc.pid}: no agent socket after 0.3 s")
        assert "\n" not in report.line()
        assert not list(scripts.iterdir()), "the copy was left on disk"
        assert running(proc)
    finally:
        stop(proc)


def test_without_roles_a_forked_copy_is_taken_for_a_dataloader_worker(agent_dir):
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\n"
        "sys.stderr.write('ready\\n')\nsys.stderr.flush()\ntime.sleep(60)\n"
    )
    proc = ready(code, agent_dir)
    try:
        (kid,) = children_of(proc.pid)
        plan = plan_load(proc.pid, roles=None)
        assert [p.pid for p in plan.processes] == [proc.pid], kid
    finally:
        stop(proc)


def test_lldb_loads_the_agent_the_same_way(agent_dir):
    import shutil

    lldb = shutil.which("lldb")
    if lldb is None:
        pytest.skip("lldb is not installed")
    proc = plain_loop(agent_dir)
    try:
        copy = place_for(proc.pid, os.getuid(), os.getgid(), {"TMPDIR": str(agent_dir.parent)})
        run = dbg.run_debugger(("lldb", lldb), proc.pid, load_code(copy.folder, copy.package))
        assert run.queued, run.output[-2000:]
        sock = agent_dir / f"agent-{proc.pid}.sock"
        until(sock.exists, timeout=15, what=f"the agent's socket: {run.output[-2000:]}")
        assert running(proc)
    finally:
        stop(proc)
