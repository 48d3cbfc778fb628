"""Messages from worker threads to the app (posting a message is thread-safe)."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class Reading(Message):
    """A source's reading, from its sampler thread: ``kind`` is the session's name for it
    (gpu, host, agents, stacks: ``session.READINGS``)."""

    def __init__(self, kind: str, value: Any) -> None:
        super().__init__()
        self.kind = kind
        self.value = value


class SourceTrouble(Message):
    """``text`` is one line for the status bar; empty when the trouble is over."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class CaptureUpdate(Message):
    """A capture started, progressed or ended (posted from its worker thread)."""

    def __init__(self, view) -> None:
        super().__init__()
        self.view = view
