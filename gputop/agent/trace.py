"""Captures a monitor asks for that must run inside the training process, on its training
thread, at step boundaries: a torch.profiler trace of N steps, and a CUDA memory snapshot of K
steps (recording enabled with a bounded entry count, dumped, disabled).

torch.profiler records a thread's CPU ops only when started on that thread, and started on one
thread and stopped on another it crashed (docs/facts/capture.md, "torch.profiler threads"): so
the monitor's request only sets ``pending`` here (from the agent's socket thread); the profiler
is started, stepped and stopped by the step-boundary hook, in the training thread. Nothing in
here may raise into training: every failure becomes a result the monitor reads.

The request is not trusted: the folder must be absolute, a real directory (not a symlink),
owned by this process's user and private (no group or other bits), and the bounds in range.
The folder is opened once, when the request is checked, and held until its result: every file
is written through that descriptor (torch gets ``/proc/self/fd/N/<name>``), so renaming the
folder and planting a link in its place later sends nothing elsewhere (issue 17).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import os
import shutil
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from . import ranks

STEPS_MAX = 20
WARMUP = 1
"""One step with the profiler running but not recording: its own start-up cost stays out."""


KINDS = ("torch-trace", "memory-snapshot")
MEMORY_ENTRIES = 100_000
"""Allocation events kept by the CUDA allocator's ring while recording (each a few KB)."""
MEMORY_MIN_BYTES = 1024
"""A snapshot smaller than this holds no data (torch writes ~600 bytes when nothing was seen)."""


@dataclass
class Request:
    """A monitor's capture request, checked: what the socket thread hands the training thread."""

    id: str
    kind: str
    steps: int
    folder: str
    max_bytes: int
    record_shapes: bool = False
    with_stack: bool = False
    profile_memory: bool = False
    dir_fd: int = -1
    """The folder, held from the check to the result; files are made relative to it."""

    def path(self, name: str) -> str:
        """``name`` in the held folder, as a path for torch: through the descriptor."""
        return f"/proc/self/fd/{self.dir_fd}/{name}"

    def release(self) -> None:
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1


@dataclass
class Running:
    """The capture on the training thread: files written so far and any error, for its result."""

    req: Request
    prof: Any
    first_step: int
    seen: int = 0
    files: list[str] = field(default_factory=list)
    error: str = ""


def _check(msg: dict[str, Any]) -> Request | str:
    """A Request from a monitor's message, or why it is refused."""
    rid = msg.get("id")
    steps = msg.get("steps")
    folder = msg.get("dir")
    cap = msg.get("max_bytes")
    options = msg.get("options")
    opts: dict[str, Any] = options if isinstance(options, dict) else {}
    if not isinstance(rid, str) or not 0 < len(rid) <= 64:
        return "a request needs an id"
    kind = msg.get("kind")
    if kind not in KINDS:
        return f"unknown capture kind: one of {', '.join(KINDS)}"
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= STEPS_MAX:
        return f"steps must be 1 to {STEPS_MAX}"
    if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
        return "max_bytes must be a positive integer"
    if not isinstance(folder, str) or not os.path.isabs(folder) or "\0" in folder:
        return "the folder must be an absolute path"
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            return PRIVATE
        return f"cannot use the folder: {e.strerror}"
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        os.close(fd)
        return PRIVATE
    flags = {k: opts.get(k) is True for k in ("record_shapes", "with_stack", "profile_memory")}
    return Request(rid, kind, steps, folder, cap, **flags, dir_fd=fd)


PRIVATE = "the folder must be a private directory (0700) of this process's user"
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class TraceCapture:
    """One torch trace at a time per process; results wait in ``results`` for the socket
    thread to send."""

    def __init__(self, rank: int | None = None) -> None:
        self.rank = rank
        self.pending: Request | None = None
        self.running: Running | None = None
        self.results: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    # ---- the socket thread ----

    def request(self, msg: dict[str, Any]) -> str | None:
        """Queue a trace; None when queued, else why not."""
        if "torch" not in sys.modules:
            return "torch is not imported in this process"
        req = _check(msg)
        if isinstance(req, str):
            return req
        with self._lock:
            if self.pending is not None or self.running is not None:
                req.release()
                return "a capture is already running in this process"
            self.pending = req
        return None

    def take_results(self) -> list[dict[str, Any]]:
        with self._lock:
            out, self.results = self.results, []
        return out

    # ---- the training thread ----

    def __call__(self, step_no: int) -> None:
        """At every step boundary (``step_no``: the step starting now, as the monitor numbers
        steps): start a pending trace, or step the running one."""
        run, req = self.running, self.pending
        try:
            if run is not None and run.req.kind == "memory-snapshot":
                run.seen += 1
                if run.seen >= run.req.steps:
                    self._dump_memory(run)
                    self._finish(run, step_no)
            elif run is not None:
                run.seen += 1
                run.prof.step()  # ends the trace once WARMUP + steps have passed
                if run.seen >= WARMUP + run.req.steps:
                    self._finish(run, step_no)
            elif self.pending is not None:
                self._start(step_no)
        except Exception as e:  # a profiler failure ends the capture, never training
            if self.running is not None:
                self.running.error = f"{type(e).__name__}: {e}"
                self._finish(self.running, step_no)
            else:
                self._report(req, "failed", f"{type(e).__name__}: {e}")
                self.pending = None

    def _start(self, step_no: int) -> None:
        req = self.pending
        assert req is not None
        if req.kind == "memory-snapshot":
            self._start_memory(req, step_no)
            return
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        import torch

        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        run = Running(req, None, step_no + WARMUP)  # step_no: the step starting now
        prof = profile(
            activities=activities,
            schedule=schedule(wait=0, warmup=WARMUP, active=req.steps, repeat=1),
            on_trace_ready=lambda p: self._write(run, p),
            record_shapes=req.record_shapes,
            with_stack=req.with_stack,
            profile_memory=req.profile_memory,
        )
        run.prof = prof
        self.pending = None
        self.running = run
        prof.start()

    def _name(self) -> str:
        rank = self.rank
        if rank is None:  # no RANK variable (mp.spawn): the process group's, once it is up
            dist = ranks.from_dist()
            rank = dist["rank"] if dist else None
        return f"rank{rank}" if rank is not None else f"pid{os.getpid()}"

    def _start_memory(self, req: Request, step_no: int) -> None:
        import torch

        self.pending = None
        if not torch.cuda.is_available():
            self._report(req, "failed", "no CUDA device in the target")
            return
        torch.cuda.memory._record_memory_history(max_entries=MEMORY_ENTRIES)
        self.running = Running(req, None, step_no)  # recorded from the step starting now

    def _dump_memory(self, run: Running) -> None:
        """The snapshot as .partial, checked to hold data, renamed; recording switched off."""
        import pickle

        import torch

        req = run.req
        final = f"{self._name()}.memory.pickle"
        tmp = final + ".partial"
        try:
            torch.cuda.memory._dump_snapshot(req.path(tmp))
            with os.fdopen(_read(req, tmp), "rb") as f:
                os.fchmod(f.fileno(), 0o600)
                size = os.fstat(f.fileno()).st_size
                snap = pickle.load(f)  # our own file, just written by torch
            if size < MEMORY_MIN_BYTES or not (isinstance(snap, dict) and snap.get("segments")):
                run.error = "the snapshot holds no allocations (nothing allocated on the GPU?)"
            else:
                os.replace(tmp, final, src_dir_fd=req.dir_fd, dst_dir_fd=req.dir_fd)
                run.files.append(final)
                if size > req.max_bytes:
                    run.error = f"the snapshot is over the {req.max_bytes} byte cap"
        except Exception as e:
            run.error = f"dumping the snapshot failed: {type(e).__name__}: {e}"
        finally:
            with contextlib.suppress(Exception):
                torch.cuda.memory._record_memory_history(enabled=None)
            _remove(req, tmp)

    def _write(self, run: Running, prof: Any) -> None:
        """on_trace_ready: a gzipped chrome trace, written as .partial and renamed."""
        req = run.req
        final = f"{self._name()}.pt.trace.json.gz"
        raw = final[: -len(".gz")] + ".partial"
        try:
            prof.export_chrome_trace(req.path(raw))
            out = os.open(final + ".partial", _NEW, 0o600, dir_fd=req.dir_fd)
            with (
                os.fdopen(_read(req, raw), "rb") as src,
                os.fdopen(out, "wb") as sink,
                gzip.GzipFile(fileobj=sink, mode="wb") as dst,
            ):
                shutil.copyfileobj(src, dst)
            os.replace(final + ".partial", final, src_dir_fd=req.dir_fd, dst_dir_fd=req.dir_fd)
            run.files.append(final)
            if os.stat(final, dir_fd=req.dir_fd).st_size > req.max_bytes:
                run.error = f"the trace is over the {req.max_bytes} byte cap"
        except Exception as e:
            run.error = f"writing the trace failed: {type(e).__name__}: {e}"
        finally:
            for leftover in (raw, final + ".partial"):
                _remove(req, leftover)

    def _finish(self, run: Running, step_no: int) -> None:
        self.running = None
        try:
            if run.prof is not None:
                run.prof.stop()
        except Exception as e:
            run.error = run.error or f"stopping the profiler failed: {type(e).__name__}: {e}"
        status = "ok" if run.files and not run.error else "partial" if run.files else "failed"
        reason = run.error or ("" if run.files else "the profiler wrote nothing")
        self._report(run.req, status, reason, run.files, (run.first_step, step_no - 1))

    def _report(
        self,
        req: Request | None,
        status: str,
        reason: str,
        files: list[str] | None = None,
        steps: tuple[int, int] | None = None,
    ) -> None:
        if req is None:
            return
        req.release()
        torch = sys.modules.get("torch")
        with self._lock:
            self.results.append(
                {
                    "id": req.id,
                    "status": status,
                    "message": reason,
                    "files": files or [],
                    "steps": list(steps) if steps else None,
                    "torch": getattr(torch, "__version__", None),
                    "python": sys.version.split()[0],
                }
            )


def _read(req: Request, name: str) -> int:
    """A file in the held folder, opened to read without following a link."""
    return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=req.dir_fd)


def _remove(req: Request, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=req.dir_fd)
