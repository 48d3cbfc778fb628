"""Armed captures on the screen: each state the session evaluates goes to ``Armed`` (the
triggers, the limits, the captures on their own threads), and what they did comes back as the
captures pane's views (a capture that started, how it ended) and as session events (every
event: fired, held back, started, ended, removed; recorded, listed by the report). Kept out of
the app, which forwards states and draws views."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from gputop.arm.armed import Armed
from gputop.session import SessionState
from gputop.ui.panes.captures import CaptureView


class ArmedCaptures:
    """One screen's armed captures (``--arm``)."""

    def __init__(
        self,
        armed: Armed,
        views: Mapping[int, CaptureView],
        show: Callable[[CaptureView], None],
        event: Callable[[str, dict[str, Any]], None],
    ) -> None:
        """``views``: the captures pane's (keys taken after them); ``show``: a view to the pane
        (``GputopApp.show_capture``); ``event``: the session's."""
        self.armed = armed
        self._views = views
        self._show = show
        self._event = event
        self._keys: dict[str, int] = {}
        """A capture's folder -> its view's key."""
        self._seen = -1

    def consider(self, state: SessionState) -> None:
        """A state the session returned: read by the triggers once per evaluation."""
        if state.evaluations != self._seen:
            self._seen = state.evaluations
            self.armed.consider(state)

    def drain(self) -> None:
        """What the armed captures did since the last call: events, and views to the pane."""
        for e in self.armed.drain():
            self._event("armed", e.doc())
            if not e.kind or e.what == "removed":
                continue
            key = self._keys.get(e.folder) if e.folder else None
            if key is None:
                key = max(self._views, default=0) + 1
                if e.folder:
                    self._keys[e.folder] = key
            status = "running" if e.what == "started" else e.what
            view = CaptureView(key, e.kind, self.armed.pid, status=status, folder=e.folder,
                               reason=e.why, trigger=e.trigger)  # fmt: skip
            old = self._views.get(key)
            self._show(replace(view, reason="") if status == "running" and old is None else view)

    def close(self) -> None:
        self.armed.close()
