"""`gputop diagnose [--pid PID | -- CMD]`: the verdict without a screen, as a timeline and the
final findings with evidence and levers (text or --json)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gputop.commands.flags import (
    UsageError,
    add_arm_flags,
    add_attach_flag,
    add_gpu_flags,
    add_output_flags,
    add_sim_flags,
    command_of,
    interval_seconds,
    json_help,
)
from gputop.commands.gpu_source import Gpus, board_from_flags, follower_for, gpu_choice, open_gpus
from gputop.commands.live_session import (
    baseline_of,
    close_session,
    new_session,
    open_armed,
    open_memory,
    open_outputs,
)
from gputop.commands.target import attach, offer_agent

if TYPE_CHECKING:
    from gputop.arm.armed import Armed
    from gputop.sources.feeds import Feed

EXIT_ON_STATUS = 3
"""The status when an --exit-on trigger fired (errors.OTHER_STATUSES says it)."""

NAME = "diagnose"
HELP = "the verdict without a screen: a timeline and the findings (text or --json)"
DESCRIPTION = (
    "Watch the GPUs (and a process, with --pid or -- CMD) for --duration seconds, or until the "
    "process exits, and print the verdict timeline and the final findings with evidence and "
    "levers."
)


EXAMPLES = """\
examples:
  gputop diagnose --pid 1234                  30 s of a running job, then the verdict
  gputop diagnose --pid 1234 --attach --json  with step phases (agent loaded), as JSON
  gputop diagnose --duration 60 -- python train.py --epochs 1   start it, watch, stop it
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser, duration: float = 30.0) -> None:
    """``duration``: the default of --duration (`gputop watch`: none, until the job ends)."""
    p.add_argument("-p", "--pid", type=int, metavar="PID", help="the training process to diagnose")
    add_attach_flag(p)
    until = f"default {duration:g}" if duration != float("inf") else "default: until it ends"
    p.add_argument("--duration", type=float, default=duration, help=f"seconds to watch ({until})")
    p.add_argument(
        "--interval", type=interval_seconds, default=1.0, help="seconds between readings"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help=json_help("diagnose"),
    )
    p.add_argument("--log", type=Path, metavar="FILE", help="where CMD's output goes")
    p.add_argument(
        "--baseline",
        metavar="FILE|last",
        help="compare this run with the run recorded in FILE (--record); `last` (the default): "
        "with the job's last run in its memory (`gputop history`)",
    )
    add_output_flags(p)
    add_arm_flags(p, exit_on=True)
    add_sim_flags(p)
    add_gpu_flags(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")


def run(args: argparse.Namespace) -> int:
    from gputop.headless import Feedback, diagnose, document, render
    from gputop.run import Job, RunError, exit_status
    from gputop.sources.feeds import feeds

    command = command_of(args)
    follower = follower_for(args, command or args.pid)
    board = board_from_flags(args, follower)
    if command and args.pid:
        raise UsageError("give either --pid or a command after --, not both")
    if args.attach and not args.pid:
        raise UsageError("--attach needs --pid (a command after -- starts with the agent)")
    if args.baseline == "last" and args.no_history:
        raise UsageError("--baseline last compares with the job's memory, which --no-history "
                         "turns off: give one of them")  # fmt: skip
    recorded = args.baseline not in (None, "last")
    baseline = baseline_of(Path(args.baseline)) if recorded else None
    sinks = open_outputs(args, "diagnose")
    job = None
    if command:
        try:
            job = Job(command, log=args.log, owned=True)
        except RunError:
            sinks.close()
            raise
        job.forward_signals()
    pid = job.pid if job else args.pid
    try:
        attached = attach(pid, getattr(args, "stacks_budget", None))
        gpus = open_gpus(board, only=gpu_choice(args))
    except BaseException:
        sinks.close()
        if job is not None:
            job.stop()
        raise
    without_agent = None
    if job is None:
        without_agent = offer_agent(attached, load=bool(args.attach))
    elif attached.agents is not None:  # every Python process of the job should have one
        attached.agents.expect_agents(job.agent_failures)
    try:
        armed = open_armed(args, pid)
    except BaseException:
        sinks.close()
        gpus.close()
        if job is not None:
            job.stop()
        raise
    session = new_session(gpus, sinks, follower, open_memory(args), baseline)
    interrupted = _interrupts() if getattr(args, "lines", False) else (lambda: False)

    def stop() -> bool:
        return interrupted() or (job is not None and job.poll() is not None)

    session.start({"simulated": gpus.simulated, "pid": pid, "command": command or None,
                   "interval": args.interval})  # fmt: skip
    try:
        sources = feeds(gpus.source, attached.host, attached.agents, attached.stacks, args.interval)
        lines = getattr(args, "lines", False)
        feedback = Feedback(sys.stdout, sys.stderr, args.duration, args.json, lines=lines)
        feedback.start(watching(pid, command, gpus, sources, args.duration, armed))
        try:
            d = diagnose(session, sources, args.duration, stop=stop, progress=feedback,
                         armed=armed, exit_on=args.exit_on or frozenset())  # fmt: skip
        finally:
            feedback.end()
    finally:
        gpus.close()
        close_session(session)
    stopped = False
    if job is not None:
        code = job.poll()
        if code is None:  # the duration is over: a diagnosis must not leave jobs behind
            stopped = True
            d.exit_code = job.stop()
        else:
            d.exit_code = exit_status(code)
    if gpus.missing:
        d.problems.insert(0, f"no GPU data: {gpus.missing}")
    if without_agent and not (attached.agents and attached.agents.connected()):
        d.problems.insert(0, without_agent)  # (an agent that came later, from a C call, is in)
    if stopped and d.exit_on is None:
        d.problems.append(f"the command was still running after {args.duration:g} s: stopped it")
    elif stopped:
        d.problems.append(f"--exit-on {d.exit_on} fired: stopped the command")
    source = {"simulated": gpus.simulated, "pid": pid, "command": command or None,
              "log": str(job.log_path) if job and job.log_path else None}  # fmt: skip
    doc = document(d, source)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(render(doc, timeline=not feedback.stream))
    return EXIT_ON_STATUS if d.exit_on is not None else 0


def _interrupts() -> Callable[[], bool]:
    """ctrl+c ends a watch with its findings (a diagnosis's own SIGINT stops the command)."""
    import signal

    hit = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: hit.set())
    return hit.is_set


def watching(
    pid: int | None,
    command: list[str],
    gpus: Gpus,
    sources: list[Feed],
    seconds: float,
    armed: Armed | None = None,
) -> str:
    """The first line: what is watched, through which sources, for how long, what is armed."""
    who = f"`{' '.join(command)}` (pid {pid})" if command else (f"pid {pid}" if pid else "the GPUs")
    board = f" on {gpus.simulated}" if gpus.simulated else ""
    names = ", ".join(f.what for f in sources)
    span = f" for {seconds:g} s" if seconds != float("inf") else " until it ends"
    arming = ""
    if armed is not None:
        arming = f"; armed: {', '.join(sorted(armed.watch.armed))} (captures in {armed.root})"
    return f"watching {who}{board}{span} through {names}{arming}; the verdict as it changes:"
