"""Running an external capture tool (py-spy, nsys): an argv list (never a shell string), its
own process group, a wall timeout (SIGINT, then SIGKILL), cancellable, stderr kept."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

GRACE_S = 3.0
"""After SIGINT (py-spy then writes what it has), this long before SIGKILL."""
TAIL = 2000


@dataclass(frozen=True)
class ToolRun:
    """How an external tool's run ended, as a value: callers explain a failure, nothing raises."""

    returncode: int | None
    stdout: str
    stderr_tail: str
    timed_out: bool
    cancelled: bool
    not_found: bool = False


def run_tool(
    argv: Sequence[str],
    timeout: float,
    cancel: threading.Event | None = None,
    env: dict[str, str] | None = None,
    pass_fds: Sequence[int] = (),
) -> ToolRun:
    """Run ``argv`` to completion, or until ``timeout`` seconds or ``cancel``; never raises for
    the tool's own failures (they are in the result). ``pass_fds``: descriptors the tool gets
    (a capture folder it writes into through ``/proc/self/fd/N``)."""
    clean = dict(env if env is not None else os.environ)
    clean.pop("RUST_BACKTRACE", None)  # py-spy would append Rust backtraces to its errors
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=clean,
            pass_fds=tuple(pass_fds),
            umask=0o077,  # what the tool writes is private to the user, like the folder
        )
    except FileNotFoundError:
        return ToolRun(None, "", "", False, False, not_found=True)
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True),  # type: ignore[union-attr]
    ]
    for r in readers:
        r.start()
    deadline = time.monotonic() + timeout
    timed_out = cancelled = False
    while proc.poll() is None:
        if cancel is not None and cancel.is_set():
            cancelled = True
            break
        if time.monotonic() >= deadline:
            timed_out = True
            break
        time.sleep(0.05)
    if proc.poll() is None:
        _stop(proc)
    for r in readers:
        r.join(timeout=GRACE_S)
    text = (err[0] if err else b"").decode(errors="replace")
    return ToolRun(
        proc.returncode,
        (out[0] if out else b"").decode(errors="replace"),
        text[-TAIL:],
        timed_out,
        cancelled,
    )


def _stop(proc: subprocess.Popen) -> None:
    """SIGINT to the tool's group (it flushes what it has), SIGKILL after the grace."""
    for sig in (signal.SIGINT, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
