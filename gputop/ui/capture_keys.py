"""The capture keys' controller: whether a capture can start now (and why not), starting one on
a worker thread, following it to its end, and the captures' current views. Kept out of the app
so that the screen only draws ``CaptureView``s and forwards keys.

The work itself is ``capture.take`` (the same path as `gputop capture`); every change goes back
to the app as a message through ``post``, posted from the worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gputop.model.roles import MAIN
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample
from gputop.ui.panes.captures import CaptureView

if TYPE_CHECKING:  # the capture code is imported when a capture starts
    from gputop.capture.manifest import Progress
    from gputop.sources.target import TargetId

CAPTURE_KINDS = {
    "flame": "pyspy-flame",
    "dump": "pyspy-dump",
    "trace": "torch-trace",
    "memory": "memory-snapshot",
    "nsys": "nsys",
}
"""The capture behind each key action ``capture_<name>``."""
AGENT_KINDS = frozenset({"trace", "memory"})
"""Capture keys whose work the agent does (they need one connected)."""
CAPTURE_ACTIONS = tuple(f"capture_{name}" for name in CAPTURE_KINDS)
TIMED_KINDS = ("pyspy-flame", "nsys")
"""Captures bounded in seconds (the others count steps or take one dump)."""


class CaptureKeys:
    """The captures the keys started in this screen, and the rules for starting more."""

    def __init__(
        self,
        pid: int | None,
        post: Callable[[CaptureView], object],
        run_thread: Callable[[Callable[[], None], str], object],
        capture_dir: str | None = None,
        seconds: float = 10.0,
        identity: TargetId | None = None,
    ) -> None:
        self.pid = pid
        """The target (None: no target, the keys say so)."""
        self.identity = identity
        """Its ``TargetId``: once it is not alive no capture starts (its PID may be reused)."""
        self._post = post
        self._run_thread = run_thread
        self.capture_dir = capture_dir
        """None: $GPUTOP_CAPTURE_DIR or ./gputop-captures."""
        self.seconds = seconds
        self.views: dict[int, CaptureView] = {}
        self._cancels: dict[int, threading.Event] = {}

    # ---- can a key work now ----

    @cached_property
    def _py_spy(self) -> str | None:
        """Looked up once: the footer asks every tick whether the keys can work."""
        from gputop.sources.stacks import find_py_spy

        return find_py_spy()

    @cached_property
    def _nsys_missing(self) -> str | None:
        """Why the nsys key cannot work for this target, found once (a job's environment and
        PATH do not change under it)."""
        from gputop.capture import nsys

        if nsys.find_nsys() is None:
            return "nsys is not on PATH (install the Nsight Systems CLI)"
        if self.pid is None or nsys.session_of(self.pid) is None:
            return "not started under nsys: relaunch with gputop run --nsys"
        return None

    def unavailable(
        self, what: str, agents: AgentsSample | None, stacks: StacksSample | None
    ) -> str | None:
        """Why the ``capture_<what>`` key cannot work now, or None when it can."""
        if self.pid is None:
            return "needs a target (--pid or gputop run)"
        if self.identity is not None and not self.identity.alive():
            return self.identity.gone()
        if what == "nsys":
            if self._nsys_missing:
                return self._nsys_missing
        elif what in AGENT_KINDS:
            if not any(a.state == "connected" for a in (agents.agents if agents else ())):
                return "needs gputop's agent in the job (gputop run, or gputop.agent.init())"
        elif self._py_spy is None:
            return "py-spy is not installed (pip install py-spy)"
        elif (denied := _ptrace_denied(stacks)) is not None:
            return denied
        kind = CAPTURE_KINDS[what]
        if any(v.kind == kind and v.status == "running" for v in self.views.values()):
            return "one is running (x cancels it)"
        return None

    @property
    def running(self) -> bool:
        return any(v.status == "running" for v in self.views.values())

    # ---- start, follow, cancel ----

    def start(self, what: str) -> CaptureView | None:
        """Start the capture behind ``capture_<what>`` on a worker thread; its first view."""
        if self.pid is None or (self.identity is not None and not self.identity.alive()):
            return None
        kind = CAPTURE_KINDS[what]
        key = max(self.views, default=0) + 1
        cancel = self._cancels[key] = threading.Event()
        pid = self.pid
        view = CaptureView(key, kind, pid)
        self._run_thread(lambda: self._take(view, cancel), f"capture-{key}")
        return view

    def _take(self, view: CaptureView, cancel: threading.Event) -> None:
        """On a worker thread: the capture runs to its end; every change goes out."""
        from gputop.capture.folder import CaptureError, capture_root
        from gputop.capture.take import Bounds, take

        post = self._post

        def progress(p: Progress) -> None:
            post(replace(view, done=p.done, total=p.total, unit=p.unit))

        def started(folder: Path) -> None:
            nonlocal view
            view = replace(view, folder=str(folder))
            post(view)

        seconds = self.seconds if view.kind in TIMED_KINDS else None
        try:
            m, folder = take(view.kind, view.pid, capture_root(self.capture_dir),
                             Bounds(seconds), cancel, progress, started)  # fmt: skip
            view = replace(view, status=m.status, reason=m.reason, folder=str(folder))
        except CaptureError as e:
            view = replace(view, status="failed", reason=str(e))
        except Exception as e:  # a capture must never take the monitor down
            view = replace(view, status="failed", reason=f"{type(e).__name__}: {e}")
        post(view)

    def update(self, view: CaptureView) -> tuple[CaptureView, bool] | None:
        """Take a capture's new view. Returns (the view kept, whether it is news for the
        session: a start or an end, not a progress tick), or None for a message that comes
        after the capture ended."""
        old = self.views.get(view.key)
        if old is not None and old.status != "running":
            return None
        if old is not None and not view.folder:
            view = replace(view, folder=old.folder)
        self.views[view.key] = view
        if view.status != "running":
            self._cancels.pop(view.key, None)
        return view, old is None or view.status != "running"

    def cancel(self) -> None:
        for cancel in self._cancels.values():
            cancel.set()

    def clear(self) -> None:
        self.views.clear()


def _ptrace_denied(latest: StacksSample | None) -> str | None:
    """The stacks source's own finding that py-spy may not read the target, if it made it."""
    main = next((p for p in latest.processes if p.role == MAIN), None) if latest else None
    if main is not None and main.error and "(ptrace)" in main.error:
        return main.error
    return None


def event_data(view: CaptureView) -> dict[str, Any]:
    """A capture's start or end as the session's event (recorded, replayed)."""
    fields = ("kind", "pid", "status", "folder", "reason", "trigger")
    return {"id": view.key, **{f: getattr(view, f) for f in fields}}
