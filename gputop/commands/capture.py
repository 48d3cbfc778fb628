"""`gputop capture KIND --pid PID`: one bounded capture of a process into a private folder
with a manifest (docs/captures.md); the same path as the screen's capture keys."""

from __future__ import annotations

import argparse
import json
import signal
import threading

NAME = "capture"
HELP = "take one bounded capture of a process for later analysis"
DESCRIPTION = (
    "Take one bounded capture of PID and its subprocesses into a private folder with a manifest "
    "(`gputop docs captures`): pyspy-flame records S seconds of stacks (speedscope JSON and an SVG "
    "flame graph), pyspy-dump every thread now (text and JSON), torch-trace N steps of "
    "torch.profiler and memory-snapshot the CUDA allocator's history over N steps, in every "
    "process that runs gputop's agent; nsys an Nsight Systems window of a job started by "
    "`gputop run --nsys`."
)
KINDS = ("pyspy-flame", "pyspy-dump", "torch-trace", "memory-snapshot", "nsys")


EXAMPLES = """\
examples:
  gputop capture pyspy-dump --pid 1234        every Python thread of the job now
  gputop capture pyspy-flame --pid 1234 --seconds 20
  gputop capture torch-trace --pid 1234 --steps 5   needs the agent in the job
"""
"""Shown after the flags in --help."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=KINDS, help="what to capture")
    p.add_argument("-p", "--pid", type=int, required=True, metavar="PID", help="the target process")
    p.add_argument(
        "--seconds", type=float, help="pyspy-flame (max 120) / nsys (max 60): how long (default 10)"
    )
    p.add_argument("--rate", type=int, help="pyspy-flame: samples per second (default 50)")
    p.add_argument(
        "--steps", type=int, help="torch-trace (default 3) / memory-snapshot (default 5): steps"
    )
    p.add_argument(
        "--max-mb", type=float, help="byte cap in MiB (flame 200, dump 50, trace 500, memory 1024)"
    )
    p.add_argument(
        "--dir",
        metavar="DIR",
        help="where capture folders go (default $GPUTOP_CAPTURE_DIR or ./gputop-captures)",
    )
    for flag, what in (("--record-shapes", "input shapes"), ("--with-stack", "Python stacks"),
                       ("--profile-memory", "allocations")):  # fmt: skip
        p.add_argument(flag, action="store_true", help=f"torch-trace: also record {what}")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")


def _capture_dir_from_config() -> str | None:
    from gputop.config import load_config

    configured = load_config().capture_dir
    return str(configured) if configured is not None else None


def run(args: argparse.Namespace) -> int:
    from gputop.capture.folder import capture_root
    from gputop.capture.manifest import document
    from gputop.capture.take import Bounds, take

    cancel = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())  # ctrl+c: keep what we have
    max_bytes = int(args.max_mb * 2**20) if args.max_mb is not None else None
    try:
        m, folder = take(
            args.kind,
            args.pid,
            capture_root(args.dir or _capture_dir_from_config()),
            Bounds(args.seconds, args.rate, max_bytes, args.steps),
            cancel,
            options={
                k: True
                for k in ("record_shapes", "with_stack", "profile_memory")
                if getattr(args, k)
            },
        )
    finally:  # a CaptureError goes on to cli.main: a bound out of range with the usage
        signal.signal(signal.SIGINT, previous)
    if args.json:
        print(json.dumps(document(m), indent=2))
    else:
        why = f": {m.reason}" if m.reason else ""
        print(f"{m.kind} of pid {args.pid}: {m.status}{why}")
        print(f"  folder {folder.resolve()}")
        for f in m.files:
            print(f"  {f.path}  {f.bytes:,} bytes")
    return {"ok": 0, "partial": 0, "cancelled": 130}.get(m.status, 1)
