"""gputop installed once, in its own environment, and jobs in theirs: the headline use.

gputop is built into a wheel and installed into a venv of its own (as pipx makes it); the jobs
run from a second venv that has torch and no gputop. Four corpus scenarios whose verdict needs
the agent's steps (a periodic evaluation, GC pauses, a torchrun straggler, a loader that keeps
the loop waiting) are diagnosed both ways: started by `gputop diagnose -- CMD`, and started
plainly then attached with `--pid --attach`. Each must end with the scenario's verdict (the
one the same-venv runs give, tests/bench/bench_verdicts.py) from a budget the agent measured.

Then a job in a container-like namespace (its own mount and PID namespaces, a private /tmp,
gputop's files hidden) attached from outside by its host PID; jobs of other users; and a job
whose environment has another gputop-why of its own.

Select them with `-k separate`; the two venvs take about a minute to make, each run ~25 s.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from harness import ATTACH_DELAY, descendants, judge, progress, unfit
from scenarios import by_name
from tests_support import REPO, as_nobody, free_port, note_timeline, until

from gputop import __version__, schemas
from gputop.agent.paths import socket_path
from gputop.inject.debugger import find_debugger
from gputop.sources.stacks import find_py_spy

pytest.importorskip("torch")

pytestmark = [
    pytest.mark.alone,
    pytest.mark.slow,
    pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed"),
    pytest.mark.skipif(
        find_debugger() is None and sys.version_info < (3, 14),
        reason="attaching needs gdb or lldb (or Python 3.14's sys.remote_exec)",
    ),
]

CORPUS = REPO / "tests" / "corpus"
DIAGNOSE_SCHEMA = schemas.load("diagnose")
WATCH_S = 14.0
"""Each scenario's watch. Under a busy core (tests/bench/margins.py over a CI run) the final
verdict held from 6 s at the latest started by diagnose (torchrun_straggler; the others from
3 s) and from the first reading once attached: 8 s of margin or more (quiet, each is right
within 1-9 s: bench_verdicts, stop 35)."""
JOB_OUTLIVES_S = 14.0
"""The container's job trains this much longer than the watch (it was 30 s, waited for in full
to see what it left in /tmp): the attach delay, loading the agent and a margin. Under a busy
core gputop's watch ended 22 s after the job started (two runs), and the job trains 30 s after
its imports: 8 s or more to spare."""
ATTACHED_WATCH_S = 10.0
"""Once attached, each held its final verdict from the first reading under a busy core (15 s
of margin at 16 s, two CI runs; 12 s at 13 s, three): 9 s of margin here."""
SCENARIOS = ("eval_every_n", "gc_pressure", "torchrun_straggler", "remote_reads")
CAN_NAMESPACE = os.geteuid() == 0 and shutil.which("unshare") is not None
"""The container test can run (it attaches to torchrun_straggler by its host PID, from the
wheel's venv: the attached run of that scenario here, and more)."""
ATTACHED = tuple(n for n in SCENARIOS if not (CAN_NAMESPACE and n == "torchrun_straggler"))
"""The scenarios attached by PID here: the container test attaches to the straggler where it
can run."""


def check(result, watched_s: float = WATCH_S) -> None:
    note_timeline([{"t_s": t, "bound": b} for t, b in result.timeline], watched_s)
    seen = " ".join(f"{t:.0f}s:{b}" for t, b in result.timeline) or result.problem
    seen += f" | problems: {result.problems}"
    assert result.final in result.scenario.expected, seen
    assert result.source == "agent", seen  # the agent ran in the job and measured the budget
    assert not any("agent" in p for p in result.problems), seen
    assert result.cause_right is not False, (result.cause, seen)  # the cause it is built with
    assert not unfit(result), (result.levers, result.setup)  # levers for its own setup


@pytest.mark.parametrize("name", SCENARIOS)
def test_separate_install_started_by_diagnose(name, separate):
    check(separate.run_mode(by_name(name), WATCH_S))


@pytest.mark.parametrize("name", ATTACHED)
def test_separate_install_attached_by_pid(name, separate):
    check(separate.attached_mode(by_name(name), ATTACHED_WATCH_S), ATTACHED_WATCH_S)


# ---- a container: its own mount and PID namespaces ------------------------------------------

IN_NAMESPACE = """
set -e
mount --make-rprivate /
mount -t tmpfs none /mnt
mkdir /mnt/venv /mnt/corpus /mnt/linked
mount --bind "$JOB_VENV" /mnt/venv
mount --bind "$CORPUS" /mnt/corpus
mount --bind "$LINKED" /mnt/linked  # where the job venv's torch links lead
mount -t tmpfs none /tmp            # its own /tmp (gputop's venv lay below the old one)
mount -t tmpfs none "$REPO"         # gputop's checkout hidden too
mkdir -p "$LINKED"                  # the links' targets back in place, alone
mount --bind /mnt/linked "$LINKED"
cd /mnt/corpus
/mnt/venv/bin/python -m torch.distributed.run --nproc-per-node 2 --master-port "$PORT" \\
    torchrun_straggler.py --seconds "$SECONDS_" > /dev/null 2>&1 || true
echo "left in /tmp:"
find /tmp -mindepth 1
"""


def _launcher(outer: int, timeout: float = 60) -> int:
    """The torchrun launcher's host PID inside the namespace ``outer`` (unshare) made."""

    def found() -> int | None:
        for pid in descendants(outer):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.split(b"\0")[1:3] == [b"-m", b"torch.distributed.run"]:
                return pid
        return None

    return until(found, timeout, what="torchrun to start in the namespace", every=0.2)


@pytest.mark.skipif(not CAN_NAMESPACE, reason="mount and PID namespaces need root and unshare")
def test_separate_install_into_a_container_by_host_pid(installs):
    gputop, job = installs
    s = by_name("torchrun_straggler")
    linked = Path(str(importlib.metadata.distribution("torch").locate_file("")))
    env = {**os.environ, "JOB_VENV": str(job.parent.parent), "CORPUS": str(CORPUS),
           "LINKED": str(linked),
           "REPO": str(REPO), "PORT": str(free_port()),
           "SECONDS_": str(WATCH_S + JOB_OUTLIVES_S)}  # fmt: skip
    outer = subprocess.Popen(
        ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "bash", "-c", IN_NAMESPACE],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    born = time.monotonic()
    try:
        launcher = _launcher(outer.pid)
        status = Path(f"/proc/{launcher}/status").read_text()
        (line,) = [ln for ln in status.splitlines() if ln.startswith("NSpid:")]
        ns_pid = line.split()[1:]
        assert len(ns_pid) == 2 and ns_pid[0] != ns_pid[1]  # in a PID namespace of its own
        assert os.stat(f"/proc/{launcher}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino
        time.sleep(ATTACH_DELAY)  # pacing: the job runs on its own before gputop attaches
        out = subprocess.run(
            [str(gputop), "diagnose", "--json", "--sim-board", "h100", "--pid", str(launcher),
             "--attach", "--duration", str(WATCH_S)],
            capture_output=True, text=True, timeout=WATCH_S + 120, cwd="/",
        )  # fmt: skip
        doc = json.loads(out.stdout)
        result = judge(s, "attached", doc, lead=ATTACH_DELAY)
        print(f"in a namespace: {progress(result)}, right at {result.first_right_s} s; "
              f"the watch ended {time.monotonic() - born:.0f} s after the job started")  # fmt: skip
        assert "agent loaded into pid" in out.stderr, out.stderr
        check(result)
        ranks = sorted(r["rank"] for r in doc["budget"]["ranks"] if r["rank"] is not None)
        assert ranks == [0, 1], doc["budget"]["ranks"]  # ranks named, by their host PIDs
        said, _ = outer.communicate(timeout=WATCH_S + 60)  # the job ends on its own
        left = said.split("left in /tmp:", 1)[1].split()
        assert not [p for p in left if "gputop-agent-" in p or p.endswith(".sock")], left
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(outer.pid, 9)
        outer.wait()


# ---- other users --------------------------------------------------------------------------


def _connected(link, timeout: float = 15.0) -> list:
    """The link's agents once one is connected (and its hello read)."""

    def hello() -> list | None:
        connected = link.connected()
        if connected and connected[0][1]:
            return connected
        link.sample()
        return None

    return until(hello, timeout, what="an agent connected and its hello read", every=0.2)


LOOP = "import time\nwhile True:\n    sum(range(100_000)); time.sleep(0.01)\n"
SYSTEM_PYTHON = "/usr/bin/python3"
"""An interpreter another user can run (pyenv's lie under /root, closed to others)."""


def _as_user(uid: int, gid: int):
    def become() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return become


@pytest.mark.skipif(os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
                    reason="needs root and a system Python another user can run")  # fmt: skip
def test_separate_install_root_attaches_to_another_users_job_and_not_the_reverse():
    import pwd

    from gputop.commands.target import attach, offer_agent
    from gputop.sources.agent_link import AgentLink

    nobody = pwd.getpwnam("nobody")
    shared = Path(tempfile.mkdtemp(prefix="gputop-users-", dir="/tmp"))
    shared.chmod(0o1777)  # the job's own /tmp, as another user has it
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(shared), "GPUTOP_DIR": str(shared / "agents")}
    job = subprocess.Popen([SYSTEM_PYTHON, "-c", LOOP], env=env, cwd="/",
                           preexec_fn=_as_user(nobody.pw_uid, nobody.pw_gid))  # fmt: skip
    mine = subprocess.Popen([SYSTEM_PYTHON, "-c", LOOP], cwd="/")
    try:
        time.sleep(1.0)  # pacing: both loops get past the interpreter's start-up before attaching
        said: list[str] = []
        problem = offer_agent(attach(job.pid), load=True, say=said.append)
        assert problem is None and said[-1] == f"agent loaded into pid {job.pid}", said
        link = AgentLink(job.pid)
        ((_, hello),) = _connected(link)
        assert hello["gputop"] == __version__  # the monitor's own agent
        link.close()
        owners = {p.stat().st_uid for p in (shared / "agents").iterdir()}
        assert owners == {nobody.pw_uid}  # the socket is the job's user's
        assert sorted(p.name for p in shared.iterdir()) == ["agents"]  # the copy is gone

        def reverse() -> str:
            lines: list[str] = []
            last = offer_agent(attach(mine.pid), load=True, say=lines.append)
            return "\n".join([*lines, f"problem: {last}"])

        text = as_nobody(reverse)
        assert "Traceback" not in text, text
        refusal = [ln for ln in text.splitlines() if ln.startswith(f"pid {mine.pid}")]
        assert len(refusal) == 1 and "belongs to uid 0, not you" in refusal[0], text
        assert "gputop run" in text or "as root" in text, text
    finally:
        for p in (job, mine):
            p.kill()
            p.wait()
        shutil.rmtree(shared, ignore_errors=True)


# ---- a job with a gputop-why of its own -----------------------------------------------------


def _older_gputop(root: Path, version: str) -> Path:
    """A gputop-why ``version`` as a job's environment could have it: its own package."""
    pkg = root / "gputop"
    for part in ("agent", "vocab"):
        shutil.copytree(REPO / "gputop" / part, pkg / part,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    return root


def test_separate_install_a_job_with_its_own_older_gputop(tmp_path, installs):
    """Not imported by the job: the monitor's agent runs beside it, the job's package untouched.
    Imported and started by the job: it is the job's agent; one line says the versions."""
    from gputop.inject import load_agent, plan_load
    from gputop.sources.agent_link import AgentLink

    _, job_python = installs
    site = _older_gputop(tmp_path / "site", "0.0.9")
    agents = tmp_path / "agents"
    agents.mkdir(mode=0o700)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site), "GPUTOP_DIR": str(agents),
           "TMPDIR": str(tmp_path)}  # fmt: skip
    quiet = "import sys, time\nimport gputop\n" + LOOP.split("\n", 1)[1]
    started = "import gputop.agent\ngputop.agent.init()\n" + LOOP
    jobs = [subprocess.Popen([str(job_python), "-c", code], env=env, cwd=tmp_path)
            for code in (quiet, started)]  # fmt: skip
    try:
        # the job that starts its own agent serves (what `nothing_to_do` below reads); the quiet
        # one, started with it, has only `import gputop` of that to do by then
        until(lambda: socket_path(jobs[1].pid, agents).exists(), timeout=30,
              what="the job's own agent serving")  # fmt: skip
        report = load_agent(plan_load(jobs[0].pid), wait_s=20)
        assert report.ok, report.line()
        again = plan_load(jobs[1].pid)
        assert again.nothing_to_do  # the job's own agent serves: nothing is loaded over it
        for job, version in zip(jobs, (__version__, "0.0.9"), strict=True):
            link = AgentLink(job.pid)
            ((_, hello),) = _connected(link)
            assert hello["gputop"] == version
            mismatch = [p for p in link.problems if "runs the agent of" in p]
            if version == __version__:
                assert mismatch == [], link.problems
            else:
                assert mismatch == [
                    f"pid {job.pid} runs the agent of gputop-why 0.0.9 (the job's own install), "
                    f"this monitor is {__version__}: what that agent does not send is left out; "
                    "pip install -U gputop-why in the job's environment, or start it with "
                    "gputop run"
                ]
            link.close()
    finally:
        for job in jobs:
            job.kill()
            job.wait()
