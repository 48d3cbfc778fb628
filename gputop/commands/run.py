"""`gputop run -- CMD`: start a training command with the agent in every Python process it
starts (no code change), and watch it; gputop exits with the job's status."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gputop.commands.flags import (
    UsageError,
    add_arm_flags,
    add_gpu_flags,
    add_sim_flags,
    add_ui_flags,
    command_of,
)
from gputop.commands.gpu_source import board_from_flags, follower_for, gpu_choice, open_gpus
from gputop.commands.live_session import new_session, open_armed, open_memory, open_outputs
from gputop.commands.screen import run_tui, ui_config
from gputop.commands.target import attach

if TYPE_CHECKING:
    from gputop.run import Job

NAME = "run"
HELP = "start a training command with the agent enabled, and attach to it"
DESCRIPTION = (
    "Run CMD with gputop's agent in every Python process it starts (no code change), and watch "
    "it. Signals reach the whole job; gputop exits with its exit code."
)


EXAMPLES = """\
examples:
  gputop run -- python train.py               the screen beside the job (agent enabled)
  gputop run --no-tui -- torchrun --nproc-per-node 8 train.py   a one-line summary at the end
  gputop run --nsys -- python train.py        so that `gputop capture nsys` works later

signals sent to gputop run reach every process of the job once; it exits with the job's status
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-tui",
        action="store_true",
        help="no screen: the job's output passes through, a per-rank summary is printed at the end",
    )
    p.add_argument("--log", type=Path, metavar="FILE", help="where the job's output goes")
    p.add_argument(
        "--nsys",
        action="store_true",
        help="start CMD inside an Nsight Systems session (nsys launch), so that the n key and "
        "`gputop capture nsys` can record a window of it later",
    )
    add_ui_flags(p, under_command=True)
    add_arm_flags(p)
    add_sim_flags(p)
    add_gpu_flags(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")


def run(args: argparse.Namespace) -> int:
    from gputop.run import Job, RunError, run_headless
    from gputop.sources.agent_link import AgentLink

    command = command_of(args)
    if not command:
        raise UsageError("nothing to run: give a command after --, e.g. gputop run -- python "
                         "train.py")  # fmt: skip
    follower = follower_for(args, command or None)
    board = board_from_flags(args, follower)
    env = None
    if args.nsys and command:
        from gputop.capture import nsys

        binary = nsys.find_nsys()
        if binary is None:
            raise RunError(nsys.NO_NSYS)
        session = nsys.session_name(f"{os.getpid()}-{int(time.time())}")
        command, env = nsys.launch_argv(binary, session, command), {nsys.SESSION_ENV: session}
    config = None if args.no_tui else ui_config(args)  # a bad --theme stops us before the job
    if args.no_tui and (getattr(args, "record", None) or getattr(args, "prometheus", None)):
        print(
            "gputop: --record and --prometheus need the monitor: drop --no-tui, or start the job "
            "and run `gputop record --pid PID -o FILE` beside it",
            file=sys.stderr,
        )
        return 2
    sinks = None if args.no_tui else open_outputs(args, "run")  # bad flags stop us before the job
    try:
        job = Job(command, log=args.log, passthrough=args.no_tui, env=env)
    except RunError:
        if sinks is not None:
            sinks.close()
        raise
    if config is None:  # --no-tui
        link = AgentLink(job.pid)
        link.expect_agents(job.agent_failures)
        return run_headless(job, link)
    job.forward_signals()
    # the job may have exited already: its agents' last words are read, the log says why
    attached = attach(job.pid, exit_code=job.exit_status, gone_ok=True)
    gpus = open_gpus(board, only=gpu_choice(args))
    if attached.agents is not None:  # every Python process of the job should serve one
        attached.agents.expect_agents(job.agent_failures)
    live = new_session(gpus, sinks, follower, open_memory(args))
    run_tui(gpus, config, live, attached, job=job, armed=open_armed(args, job.pid))
    return _after_screen(job)


def _after_screen(job: Job) -> int:
    """The screen has closed: the job's status once it ended (waiting for it when gputop passed
    it SIGTERM or SIGHUP), else where it goes on."""
    import signal

    if job.poll() is None and job.ending is not None:
        name = signal.Signals(job.ending).name
        _say(f"gputop: passed {name} on to the job (pid {job.pid}); waiting for it to end")
        job.wait()  # further signals are passed on meanwhile
    if job.poll() is None:
        _say(f"gputop: the job goes on as pid {job.pid}; its output: {job.log_path}")
        return 0
    from gputop.run import exit_status

    code = exit_status(job.wait())
    tail = job.tail()
    if tail:
        _say(tail, sys.stdout)
    _say(f"gputop: the job exited with status {code}; its output: {job.log_path}")
    return code


def _say(line: str, out=None) -> None:
    """A last line; after SIGHUP the terminal may be gone, which must not cost the job's
    status."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=out or sys.stderr, flush=True)
