"""The nsys capture kind: an Nsight Systems window of S seconds on a job that runs inside an
nsys session. nsys cannot attach to a running process (docs/facts/capture.md, "Nsight
Systems"), so a job must be started by `gputop run --nsys -- CMD`, which launches it with
`nsys launch --session-new=NAME` and tells its processes the session's name; a capture is then
`nsys start` / `nsys stop` on that session. For any other job the capture explains this and
prints the relaunch command."""

from __future__ import annotations

import shlex
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from gputop.capture.external import run_tool
from gputop.capture.folder import Folder
from gputop.capture.manifest import CaptureTarget, Manifest, Progress, Tool
from gputop.sources.procfs import descendants, parse_environ, start_ticks

SESSION_ENV = "GPUTOP_NSYS_SESSION"
SECONDS = 10.0
SECONDS_MAX = 60.0
MAX_BYTES = 2 * 2**30
START_S = 30.0
STOP_S = 120.0
"""nsys writes the report when the window stops: large jobs take a while."""
NO_NSYS = (
    "nsys is not on PATH: install the Nsight Systems CLI "
    "(https://developer.nvidia.com/nsight-systems) or add its bin folder to PATH"
)


def find_nsys() -> str | None:
    return shutil.which("nsys")


def session_name(run_id: str) -> str:
    return f"gputop-{run_id}"


def launch_argv(nsys: str, session: str, command: Sequence[str]) -> list[str]:
    """The job started inside a named session; collection starts only with `nsys start`."""
    return [nsys, "launch", f"--session-new={session}", "--trace=cuda,nvtx,osrt", *command]


def session_of(pid: int, proc_root: str = "/proc") -> str | None:
    """The session `gputop run --nsys` put the job in, from the environment of the target or a
    process below it (nsys launches the command as its child)."""
    for p in descendants(pid, proc_root):
        try:
            with open(f"{proc_root}/{p}/environ", "rb") as f:
                name = parse_environ(f.read()).get(SESSION_ENV)
        except OSError:
            continue
        if name and all(c.isalnum() or c in "-_" for c in name):
            return name
    return None


def not_under_nsys(pid: int, proc_root: str = "/proc") -> str:
    try:
        with open(f"{proc_root}/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        argv = []
    again = shlex.join(["gputop", "run", "--nsys", "--", *argv]) if argv else "gputop run --nsys"
    return (
        f"pid {pid} was not started under nsys, and Nsight Systems cannot attach to a running "
        f"process: relaunch it with `{again}`, or take a torch trace (no relaunch needed)"
    )


def window(
    m: Manifest,
    folder: Folder,
    pid: int,
    seconds: float,
    max_bytes: int,
    cancel: threading.Event,
    progress: Callable[[Progress], None] = lambda p: None,
) -> Manifest:
    nsys = find_nsys()
    if nsys is None:
        return m.ended("failed", NO_NSYS)
    session = session_of(pid)
    if session is None:
        return m.ended("failed", not_under_nsys(pid))
    # nsys writes from its session's own process, which cannot share our descriptor: it gets
    # the held folder's path now, below a root checked to be safe from other users
    out = folder.real_path() / "nsys"
    start = [nsys, "start", f"--session={session}", f"--output={out}"]
    stop = [nsys, "stop", f"--session={session}"]
    m = replace(m, targets=(CaptureTarget(pid, "main", start_ticks(pid)),),
                tool=Tool("nsys", _version(nsys), tuple(start)))  # fmt: skip
    began = run_tool(start, START_S, cancel)
    if began.returncode != 0:
        tail = began.stderr_tail.strip().splitlines()
        why = tail[-1] if tail else f"exit status {began.returncode}"
        tool = replace(m.tool, stderr_tail=began.stderr_tail) if m.tool else None
        return m.ended("failed", f"nsys start failed: {why}", tool=tool)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds and not cancel.is_set():
        progress(Progress(time.monotonic() - t0, seconds, "s"))
        time.sleep(min(0.5, seconds))
    ended = run_tool(stop, STOP_S)  # always stop, even when cancelled: the session stays usable
    tool = Tool("nsys", m.tool.version if m.tool else None, (*start, "&&", *stop),
                (began.stderr_tail + ended.stderr_tail)[-2000:])  # fmt: skip
    reports = [n for n in folder.names() if n.endswith((".nsys-rep", ".qdrep"))]
    reports = [n for n in reports if folder.size(n) is not None]  # regular files only
    for n in reports:
        folder.make_private(n)
    files = tuple(folder.entry(n) for n in reports)
    took = time.monotonic() - t0
    if ended.returncode != 0 or not files:
        last = ended.stderr_tail.strip().splitlines()[-1:] or ["no report was written"]
        status = "partial" if files else "failed"
        return m.ended(status, f"nsys stop: {last[0]}", tool=tool, files=files)
    if sum(f.bytes for f in files) > max_bytes:
        return m.ended("partial", f"the report is over the {max_bytes} byte cap", tool=tool,
                       files=files)  # fmt: skip
    if cancel.is_set():
        return m.ended("cancelled", f"stopped after {took:.0f} s; the report covers that",
                       tool=tool, files=files)  # fmt: skip
    return m.ended("ok", tool=tool, files=files)


def _version(nsys: str) -> str | None:
    run = run_tool([nsys, "--version"], timeout=10)
    return run.stdout.strip().splitlines()[0] if run.stdout.strip() else None
