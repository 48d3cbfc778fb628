"""The session of a live mode: its outputs (--record, --prometheus) opened before anything
starts, the Session over the GPUs that were opened, and its close, which says where the
recording went and what went wrong on the way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # imported where they are used: the command decides what it loads
    from gputop.arm.armed import Armed
    from gputop.commands.gpu_source import Gpus
    from gputop.diagnose import Remembered
    from gputop.history.store import Memory
    from gputop.record.writer import Recorder
    from gputop.session import Session
    from gputop.sim.scenarios import PhaseFollower
    from gputop.sinks import Sink, Sinks


def open_outputs(args: argparse.Namespace, mode: str, record: Path | None = None) -> Sinks:
    """The --record and --prometheus sinks of a live mode, opened before anything starts so
    that a bad flag stops the command at once (a SinkError: one line)."""
    from gputop.sinks import Sinks

    record = record if record is not None else getattr(args, "record", None)
    prometheus = getattr(args, "prometheus", None)
    opened: list[Sink] = []
    if record is not None:
        from gputop.record.writer import Recorder

        opened.append(Recorder(record))
    if prometheus is not None:
        from gputop.export.prometheus import ExportError, open_exporter

        try:
            opened.append(open_exporter(prometheus))
        except ExportError:
            for sink in opened:
                sink.close()
            raise
    sinks = Sinks(opened)
    sinks.meta = {"mode": mode}
    return sinks


def open_memory(args: argparse.Namespace) -> Memory | None:
    """The jobs' memory for a live mode, unless --no-history or the config's ``history =
    false`` turned it off. Opened lazily: a memory that cannot be used says so once, in the
    session's problems, and the session goes on without it."""
    if getattr(args, "no_history", False):
        return None
    from gputop.config import load_config

    if not load_config(getattr(args, "config", None)).history:
        return None
    from gputop.history.store import Memory

    return Memory()


def open_armed(args: argparse.Namespace, pid: int | None) -> Armed | None:
    """Armed captures of ``pid`` as --arm (or --exit-on) and the config ask; None when nothing
    is armed. A capture root that cannot be used fails each capture with its line, never the
    session."""
    from gputop.config import load_config

    config = load_config(getattr(args, "config", None))
    chosen = getattr(args, "arm", None)
    exit_on = getattr(args, "exit_on", None) or frozenset()
    armed = (chosen if chosen is not None else config.arm) | exit_on
    if not armed:
        return None
    if pid is None:
        from gputop.commands.flags import UsageError

        raise UsageError("--arm needs a job: --pid PID or a command after --")
    from gputop.arm.armed import Armed
    from gputop.arm.triggers import WARMUP_S
    from gputop.capture.folder import capture_root
    from gputop.capture.nsys import find_nsys, session_of

    where = getattr(args, "capture_dir", None) or config.capture_dir
    budget = getattr(args, "arm_budget_mb", None) or config.arm_budget_mb
    warmup = getattr(args, "arm_warmup", None)
    return Armed(
        pid,
        capture_root(str(where) if where is not None else None),
        armed,
        warmup_s=WARMUP_S if warmup is None else max(0.0, warmup),
        budget_bytes=int(budget * 2**20),
        nsys=lambda: find_nsys() is not None and session_of(pid) is not None,
    )


def baseline_of(path: Path) -> Remembered:
    """The run recorded in ``path`` to compare a live run with (``diagnose --baseline``); a
    file with none is one line."""
    from gputop.errors import CannotDo
    from gputop.record.reader import open_recording
    from gputop.record.recorded_run import recorded_run

    got = recorded_run(open_recording(path))
    if got.run is None:
        raise CannotDo(
            f"{path} holds no run to compare with: no agent reported 64 steps or more in it"
        )
    return got.run


def new_session(
    gpus: Gpus,
    sinks: Sinks | None = None,
    follower: PhaseFollower | None = None,
    memory: Memory | None = None,
    baseline: Remembered | None = None,
) -> Session:
    """The session of a live mode over the GPUs that were opened; with a simulated board's
    ``follower``, the job's readings steer it (a sink like the recorder); with ``memory``,
    the job's last run is what this one is compared with (unless ``baseline``, a recorded
    run, is), and this one is kept there."""
    import os
    import time

    from gputop.session import Session
    from gputop.sinks import Sinks

    sinks = sinks if sinks is not None else Sinks()
    if follower is not None:
        from gputop.sim.steering import BoardSteering

        sinks.sinks.append(BoardSteering(follower))
    run_id = f"{time.time_ns():x}-{os.getpid()}"
    return Session(
        gpus.source.devices, sinks=sinks, memory=memory, run_id=run_id, baseline=baseline
    )


def close_session(session: Session | None) -> None:
    """Close the outputs, then say where the recording is and what went wrong on the way."""
    if session is None:
        return
    # the sinks that write bytes are the recorders (not isinstance: that would load the writer
    # into every session that records nothing)
    recorders = cast(
        "list[Recorder]", [s for s in session.sinks.sinks if hasattr(s, "bytes_written")]
    )
    for problem in session.close():
        print(f"gputop: {problem}", file=sys.stderr)
    for r in recorders:
        if r.bytes_written:  # one that never started removed its empty file
            print(f"gputop: recorded to {r.path} (gputop replay / gputop report)", file=sys.stderr)
