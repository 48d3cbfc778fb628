"""`gputop run -- CMD ...`: start a training command with the agent enabled and attach to it.

No change to the script is needed, and gputop need not be installed where the job runs: the
child's PYTHONPATH starts with a private folder holding a copy of gputop's agent and a
sitecustomize.py that starts it (then runs any sitecustomize the user already had), so every
Python process of the job gets it, torchrun ranks included (``inject/agent_copy.py``). The
folder is removed when the job has ended. The child's output goes to
a log file (the TUI owns the terminal) whose tail is printed when gputop ends; signals sent to
gputop are passed on to the whole job; gputop exits with the child's exit code.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gputop.agent.paths import runtime_dir, serving_dir
from gputop.errors import CannotStart
from gputop.inject.agent_copy import AgentCopy, CopyError, place_for_run
from gputop.sources.procfs import descendants

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
ENDING = (signal.SIGTERM, signal.SIGHUP)
"""Passed on, and gputop ends once the job has: someone wants the whole run stopped (SIGTERM)
or its terminal is gone (SIGHUP)."""


class RunError(CannotStart):
    """The command cannot be started (none given, not found, not allowed, no nsys for --nsys):
    one line for the user."""

    when = "a job's command missing, not found or not allowed, its log unwritable, or no nsys"


def child_env(folder: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The job's environment: ``folder`` (the agent's copy, ``agent_copy.place_for_run``) first
    on its PYTHONPATH, and the agent told to start."""
    env = dict(os.environ if environ is None else environ)
    paths = [folder] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["GPUTOP_AGENT_AUTOSTART"] = "1"
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _owned_child() -> None:
    """In an owned job's child before exec: SIGINT back to its default, and SIGTERM when the
    parent exits (Linux PR_SET_PDEATHSIG). gputop stops an owned job with SIGINT, as ctrl+c
    would; started from a shell that ignores SIGINT (nohup, `cmd &` in a script, some CI
    runners) the job would inherit it ignored, and only the SIGTERM 5 s later stopped it."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal(signal.SIGINT, ctypes.c_void_p(0))  # SIG_DFL, from any thread
        libc.prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


class Job:
    """The launched command: its process group, its log, its exit code."""

    def __init__(
        self,
        command: Sequence[str],
        log: Path | None = None,
        passthrough: bool = False,
        env: dict[str, str] | None = None,
        owned: bool = False,
    ):
        """``owned``: the job exists only for this gputop (demo, diagnose): it gets SIGTERM
        when gputop dies, however it dies (a SIGHUP or SIGKILL mid-shutdown included)."""
        if not command:
            raise RunError(
                "nothing to run: give a command after --, e.g. gputop run -- python train.py"
            )
        self.command = list(command)
        self.log_path: Path | None = None
        try:
            self.copy: AgentCopy | None = place_for_run()
        except CopyError as e:
            raise RunError(f"{e}: set GPUTOP_DIR to a private folder") from None
        out = None
        if not passthrough:
            # the default folder, or a fresh private one when another user took it first (the
            # log's path is said when gputop ends, wherever it is)
            self.log_path = log or serving_dir(runtime_dir())[0] / (
                f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
            )
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (0 if log else os.O_NOFOLLOW)
            try:
                fd = os.open(self.log_path, flags, 0o600)
            except OSError as e:
                raise RunError(f"cannot write the job's log {self.log_path}: {e.strerror}; "
                               "pass --log FILE") from None  # fmt: skip
            out = os.fdopen(fd, "wb")
        try:
            self.proc = subprocess.Popen(
                self.command,
                env={**child_env(self.copy.folder), **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT if out else None,
                stdin=subprocess.DEVNULL if out else None,
                start_new_session=True,
                preexec_fn=_owned_child if owned and sys.platform == "linux" else None,
            )
        except FileNotFoundError:
            self.forget_copy()
            raise RunError(f"command not found: {self.command[0]}") from None
        except PermissionError:
            self.forget_copy()
            raise RunError(f"not allowed to run {self.command[0]}") from None
        finally:
            if out is not None:
                out.close()
        atexit.register(self.forget_copy)  # the job outlived gputop (or gputop never polled)
        self.pid = self.proc.pid
        self.ending: int | None = None
        """An ``ENDING`` signal gputop passed on: gputop waits for the job, then ends."""

    def poll(self) -> int | None:
        code = self.proc.poll()
        if code is not None:
            self.forget_copy()
        return code

    def agent_failures(self) -> dict[int | None, str]:
        """Why the agent did not start in a process of the job, by pid (its copy says)."""
        return self.copy.failures() if self.copy is not None else {}

    def forget_copy(self) -> None:
        """Remove the agent's copy: the job has ended (later processes start without it)."""
        if self.copy is not None:
            self.copy.remove()
            self.copy.close()
            self.copy = None

    def exit_status(self) -> int | None:
        """As a shell reports it (130 for SIGINT), or None while running."""
        code = self.proc.poll()
        return exit_status(code) if code is not None else None

    def signal(self, sig: int) -> None:
        """Once to every process of the job: its process group, then each descendant outside
        it (torchrun starts its ranks in sessions of their own). Twice would run a handler
        twice: a trainer that checkpoints on SIGINT does it again, torchrun takes a second
        SIGINT as "give up the clean stop"."""
        tree = descendants(self.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        for pid in tree:
            try:
                if os.getpgid(pid) != self.pid:
                    os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                continue

    def pass_on(self, sig: int) -> None:
        """A signal gputop received, for the job (as if gputop were not between them)."""
        if sig in ENDING:
            self.ending = sig
        self.signal(sig)

    def stop(self, grace: float = 5.0) -> int:
        """SIGINT (like ctrl+c), then SIGTERM, then SIGKILL; returns the exit status."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.signal(sig)
            try:
                code = self.proc.wait(grace)
                self.forget_copy()
                return exit_status(code)
            except subprocess.TimeoutExpired:
                continue
        self.signal(signal.SIGKILL)
        return exit_status(self.wait())

    def forward_signals(self) -> None:
        """From now on the ``FORWARDED`` signals gputop gets go to the job (the screen, while
        it runs, handles SIGTERM and SIGHUP itself and passes them on the same way)."""
        for sig in FORWARDED:
            signal.signal(sig, lambda s, _f: self.pass_on(s))

    def wait(self) -> int:
        code = self.proc.wait()
        self.forget_copy()
        return code

    def tail(self, lines: int = 20) -> str:
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def exit_status(code: int) -> int:
    """A child killed by signal N reports -N; a shell would say 128 + N."""
    return 128 - code if code < 0 else code


class StepTally:
    """Every step each agent reported, counted once across readings. A reading repeats only
    the agent's last few hundred steps (the summary's medians use the last 50), so the total
    comes from here: steps seen once each, plus those whose numbers were skipped between two
    readings (more steps than a reading holds went by)."""

    def __init__(self) -> None:
        self.cursors: dict[int, tuple[int, int]] = {}
        self.counts: dict[int, int] = {}

    def add(self, agents: Sequence) -> None:
        from gputop.model.steps import new_steps

        for a in agents:
            old = self.cursors.get(a.pid)
            fresh, cursor = new_steps(a.steps, old)
            if not fresh or cursor is None:
                continue
            first = fresh[0].step  # agents number steps from 0
            unseen = first - old[0] - 1 if old is not None and first > old[0] else first
            self.counts[a.pid] = self.counts.get(a.pid, 0) + len(fresh) + max(0, unseen)
            self.cursors[a.pid] = cursor


def summary(agents: Sequence, out=sys.stdout, totals: dict[int, int] | None = None) -> None:
    """A plain-text account of the steps the agents reported (for --no-tui and logs):
    ``totals`` (pid -> steps, a ``StepTally``'s) the whole run's count; medians are over the
    recent steps."""
    from gputop.model.ranks import rank_work
    from gputop.model.step_stats import phase_shares, usable

    ranks = rank_work(agents)  # the ranks pane's numbers
    for a in agents:
        who = f"rank {a.rank}" if a.rank is not None else f"pid {a.pid}"
        r = ranks.row(a.pid)
        if r is None:  # no usable steps: the first step includes start-up
            print(f"gputop: {who}: no steps reported", file=out)
            continue
        shares = ", ".join(
            f"{name} {share:.0%}" if share >= 0.01 else f"{name} {share:.1%}"
            for name, share in phase_shares(usable(a.steps))
        )
        total = max((totals or {}).get(a.pid, 0), len(a.steps))
        over = f" over the last {r.steps}" if r.steps < total - 1 else ""
        print(
            f"gputop: {who}: {total} steps, median {r.step_ms:.1f} ms{over}"
            f" (work {r.work_ms:.1f} ms, sync wait {r.sync_ms:.1f} ms); {shares}",
            file=out,
        )


def run_headless(job: Job, link, poll_s: float = 0.5) -> int:
    """--no-tui: the job's output passes through; the agents' account is printed at the end."""
    job.forward_signals()
    agents: Sequence = ()
    tally = StepTally()
    while job.poll() is None:
        sample = link.sample()
        agents = sample.agents
        tally.add(agents)
        for problem in sample.problems:  # an agent that did not start, said as it is known
            print(f"gputop: {problem}", file=sys.stderr)
        time.sleep(poll_s)
    for _ in range(3):  # the last steps may still be in flight
        agents = link.sample().agents or agents
        tally.add(agents)
        time.sleep(0.1)
    link.close()
    from gputop.model.ranks import ranked

    summary(ranked(agents), totals=tally.counts)
    return exit_status(job.wait())
