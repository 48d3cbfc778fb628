"""`gputop record --pid PID -o FILE`: the session without a screen, written to a recording
until the process exits, --duration passes or ctrl+c (`gputop replay`, `gputop report`)."""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from gputop.commands.flags import (
    add_arm_flags,
    add_attach_flag,
    add_gpu_flags,
    add_history_flag,
    add_sim_flags,
    interval_seconds,
)
from gputop.commands.gpu_source import board_from_flags, follower_for, gpu_choice, open_gpus
from gputop.commands.live_session import (
    close_session,
    new_session,
    open_armed,
    open_memory,
    open_outputs,
)
from gputop.commands.target import attach, offer_agent
from gputop.errors import CannotDo

if TYPE_CHECKING:
    from gputop.model.host import HostSample
    from gputop.sources.host import HostSource

NAME = "record"
HELP = "record a training process without a screen (replay or report it later)"
DESCRIPTION = (
    "Read the GPUs, the process tree, its agents and stacks, and write every reading and "
    "verdict to FILE until the process exits, --duration passes or ctrl+c."
)


EXAMPLES = """\
examples:
  gputop record --pid 1234 -o run.gputop      until ctrl+c or the job ends
  gputop record --pid 1234 -o run.gputop --duration 600 --prometheus 9400
  gputop report run.gputop                    then read it; gputop replay run.gputop to watch
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-p", "--pid", type=int, required=True, metavar="PID", help="the process to record"
    )
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE",
                   help="the recording to write (never overwritten)")  # fmt: skip
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.add_argument(
        "--interval", type=interval_seconds, default=2.0, help="seconds between readings"
    )
    p.add_argument("--prometheus", metavar="[ADDR:]PORT", help="also serve Prometheus metrics")
    add_attach_flag(p)
    add_history_flag(p)
    add_arm_flags(p)
    add_sim_flags(p)
    add_gpu_flags(p)


def run(args: argparse.Namespace) -> int:
    from gputop.headless import diagnose
    from gputop.sources.feeds import feeds

    follower = follower_for(args, args.pid)
    board = board_from_flags(args, follower)
    armed = open_armed(args, args.pid)
    attached = attach(args.pid, getattr(args, "stacks_budget", None))
    sinks = open_outputs(args, "record", record=args.output)
    offer_agent(attached, load=bool(args.attach))
    gpus = open_gpus(board, only=gpu_choice(args))
    if gpus.missing:
        print(f"gputop: no GPU data: {gpus.missing}; recording the process only", file=sys.stderr)
    session = new_session(gpus, sinks, follower, open_memory(args))
    stopping = threading.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda *_: stopping.set()) for sig in signals}
    recorders = [s for s in sinks.sinks if hasattr(s, "bytes_written")]
    session.start({"simulated": gpus.simulated, "pid": args.pid, "command": attached.command(),
                   "interval": args.interval})  # fmt: skip
    failed = [r.problem for r in recorders if r.problem]
    if failed:  # the file could not even start (disk full): nothing to record into
        gpus.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        close_session(session)
        raise CannotDo(failed[0])
    assert attached.host is not None  # --pid is required, and attach opened it
    watched = NoticingExit(attached.host)
    print(f"gputop: recording pid {args.pid} to {args.output} (ctrl+c stops)", file=sys.stderr)
    try:
        sources = feeds(gpus.source, watched, attached.agents, attached.stacks, args.interval)
        d = diagnose(
            session, sources, args.duration or math.inf,
            stop=lambda: stopping.is_set() or watched.exited, armed=armed,
        )  # fmt: skip
    finally:
        gpus.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        close_session(session)
    for problem in d.problems:
        print(f"gputop: note: {problem}", file=sys.stderr)
    for e in d.armed:  # the recording holds them too (the report lists them)
        print(f"gputop: {e.line()}", file=sys.stderr)
    return 0


class NoticingExit:
    """The host source, remembering whether the target has exited (a recording stops then,
    after the reading that says so: its exit code and last cgroup state are in the file)."""

    def __init__(self, host: HostSource) -> None:
        self.host = host
        self.pid = host.pid
        self.exited = False

    def sample(self) -> HostSample:
        h = self.host.sample()
        self.exited = h.state == "exited"
        return h
