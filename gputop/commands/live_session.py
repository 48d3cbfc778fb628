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
    from gputop.commands.gpu_source import Gpus
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


def new_session(
    gpus: Gpus, sinks: Sinks | None = None, follower: PhaseFollower | None = None
) -> Session:
    """The session of a live mode over the GPUs that were opened; with a simulated board's
    ``follower``, the job's readings steer it (a sink like the recorder)."""
    from gputop.session import Session
    from gputop.sinks import Sinks

    sinks = sinks if sinks is not None else Sinks()
    if follower is not None:
        from gputop.sim.steering import BoardSteering

        sinks.sinks.append(BoardSteering(follower))
    return Session(gpus.source.devices, sinks=sinks)


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
