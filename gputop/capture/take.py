"""Taking one capture: bounds checked, the disk checked, a private folder, the manifest written
at the start ("running") and at the end, one capture per kind per process at a time. The same
path serves the TUI's keys and `gputop capture`."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gputop.capture import manifest, nsys, pyspy, torch_trace
from gputop.capture.folder import (
    CaptureBoundsError,
    CaptureError,
    Folder,
    check_free,
    new_folder,
)
from gputop.capture.manifest import Manifest, Progress
from gputop.sources.procfs import start_ticks

KINDS = ("pyspy-flame", "pyspy-dump", "torch-trace", "memory-snapshot", "nsys")

_running: set[tuple[str, int]] = set()
_lock = threading.Lock()


@dataclass(frozen=True)
class Bounds:
    """How long, how fast, how big or how many steps a capture may run; None: the kind's default."""

    seconds: float | None = None
    rate: int | None = None
    max_bytes: int | None = None
    steps: int | None = None


def checked(kind: str, b: Bounds) -> Bounds:
    """Defaults filled in; a bound outside its range is an error that says the range."""
    if kind not in KINDS:
        raise CaptureBoundsError(f"unknown capture kind {kind!r}: one of {', '.join(KINDS)}")
    if kind == "pyspy-flame":
        seconds = pyspy.FLAME_SECONDS if b.seconds is None else b.seconds
        if not 1 <= seconds <= pyspy.FLAME_SECONDS_MAX:
            raise CaptureBoundsError(
                f"--seconds {seconds:g}: from 1 to {pyspy.FLAME_SECONDS_MAX:g}"
            )
        rate = pyspy.FLAME_RATE if b.rate is None else b.rate
        if not 1 <= rate <= pyspy.FLAME_RATE_MAX:
            raise CaptureBoundsError(f"--rate {rate}: from 1 to {pyspy.FLAME_RATE_MAX} samples/s")
        cap = pyspy.FLAME_MAX_BYTES if b.max_bytes is None else b.max_bytes
    elif kind == "nsys":
        seconds = nsys.SECONDS if b.seconds is None else b.seconds
        if not 1 <= seconds <= nsys.SECONDS_MAX:
            raise CaptureBoundsError(f"--seconds {seconds:g}: from 1 to {nsys.SECONDS_MAX:g}")
        cap = nsys.MAX_BYTES if b.max_bytes is None else b.max_bytes
        return _capped(Bounds(seconds, None, cap))
    elif kind in torch_trace.STEPS:
        steps = torch_trace.STEPS[kind] if b.steps is None else b.steps
        if not 1 <= steps <= torch_trace.STEPS_MAX:
            raise CaptureBoundsError(f"--steps {steps}: from 1 to {torch_trace.STEPS_MAX}")
        cap = torch_trace.MAX_BYTES[kind] if b.max_bytes is None else b.max_bytes
        return _capped(Bounds(None, None, cap, steps))
    else:
        seconds, rate = None, None
        cap = pyspy.DUMP_MAX_BYTES if b.max_bytes is None else b.max_bytes
    return _capped(Bounds(seconds, rate, cap))


MAX_BYTES_LIMIT = 64 * 2**30
"""No byte cap above this: a bigger capture would not be copied down anyway."""


def _capped(b: Bounds) -> Bounds:
    if b.max_bytes is None or not 0 < b.max_bytes <= MAX_BYTES_LIMIT:
        raise CaptureBoundsError(f"--max-mb must be above 0 and at most {MAX_BYTES_LIMIT // 2**20}")
    return b


def take(
    kind: str,
    pid: int,
    root: Path,
    bounds: Bounds = Bounds(),
    cancel: threading.Event | None = None,
    progress: Callable[[Progress], None] = lambda p: None,
    started: Callable[[Path], None] = lambda folder: None,
    options: dict[str, bool] | None = None,
    trigger: dict[str, Any] | None = None,
    after: Callable[[], dict[str, Any]] | None = None,
    only: frozenset[int] | None = None,
) -> tuple[Manifest, Path]:
    """Run one capture to its end; raises CaptureError only when it cannot start (then no
    folder is left behind). ``trigger``: what fired an armed capture, in its manifest from the
    start; ``after()``: what it adds once the capture has ended (the steps since); ``only``: the
    ranks an agent's capture is taken on (the slow one and a typical one)."""
    b = checked(kind, bounds)
    assert b.max_bytes is not None
    if start_ticks(pid) is None:
        raise CaptureError(f"pid {pid} is not running: nothing to capture")
    key = (kind, pid)
    with _lock:
        if key in _running:
            raise CaptureError(f"a {kind} capture of pid {pid} is already running")
        _running.add(key)
    try:
        check_free(root, b.max_bytes)
        with new_folder(root, kind) as folder:
            m, path = _run(kind, pid, b, folder, cancel, progress, started, options, trigger,
                           only)  # fmt: skip
            if after is not None and m.trigger is not None:
                m = replace(m, trigger={**m.trigger, **after()})
                with contextlib.suppress(OSError):  # the capture is kept without it
                    manifest.write(folder, m)
            return m, path
    finally:
        with _lock:
            _running.discard(key)


def _run(
    kind: str,
    pid: int,
    b: Bounds,
    folder: Folder,
    cancel: threading.Event | None,
    progress: Callable[[Progress], None],
    started: Callable[[Path], None],
    options: dict[str, bool] | None,
    trigger: dict[str, Any] | None = None,
    only: frozenset[int] | None = None,
) -> tuple[Manifest, Path]:
    """The capture in its held folder, from the first manifest to the last."""
    assert b.max_bytes is not None
    m = Manifest(
        id=folder.name,
        kind=kind,
        bounds={
            "seconds": b.seconds,
            "rate": b.rate,
            "max_bytes": b.max_bytes,
            "steps": b.steps,
        },
        requested_at=time.time(),
        options=dict(options or {}),
        trigger=trigger,
    )
    try:
        manifest.write(folder, m)
    except OSError as e:
        raise CaptureError(f"cannot write in {folder.path}: {e.strerror or e}") from e
    started(folder.path)
    try:
        if kind == "pyspy-flame":
            assert b.seconds is not None and b.rate is not None
            m = pyspy.flame(
                m, folder, pid, b.seconds, b.rate, b.max_bytes, cancel or threading.Event(),
                progress,
            )  # fmt: skip
        elif kind == "nsys":
            assert b.seconds is not None
            m = nsys.window(m, folder, pid, b.seconds, b.max_bytes,
                            cancel or threading.Event(), progress)  # fmt: skip
        elif kind in torch_trace.STEPS:
            assert b.steps is not None
            m = torch_trace.trace(m, folder, pid, b.steps, b.max_bytes,
                                  cancel or threading.Event(), progress, kind=kind,
                                  options=m.options, only=only)  # fmt: skip
        else:
            m = pyspy.dump(m, folder, pid, b.max_bytes, bool(m.options.get("native")))
    except CaptureError as e:  # found out once started (no agent): said in the manifest
        m = m.ended("failed", str(e))
    except OSError as e:  # disk full, folder removed under us: said, never raised on
        m = m.ended("failed", f"writing the capture failed: {e.strerror or e}")
    try:
        manifest.write(folder, m)
    except OSError as e:
        m = m.ended("failed", f"cannot write the manifest: {e.strerror or e}")
    return m, folder.path
