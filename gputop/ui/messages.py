"""Messages from the sampling thread to the app (posting a message is thread-safe)."""

from __future__ import annotations

from textual.message import Message

from gputop.model import GpuSample
from gputop.model.host import HostSample
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample


class GpuSamplesReady(Message):
    def __init__(self, samples: list[GpuSample]) -> None:
        super().__init__()
        self.samples = samples


class SourceTrouble(Message):
    """``text`` is one line for the status bar; empty when the trouble is over."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class HostSampleReady(Message):
    def __init__(self, sample: HostSample) -> None:
        super().__init__()
        self.sample = sample


class AgentsReady(Message):
    def __init__(self, sample: AgentsSample) -> None:
        super().__init__()
        self.sample = sample


class StacksReady(Message):
    def __init__(self, sample: StacksSample) -> None:
        super().__init__()
        self.sample = sample


class CaptureUpdate(Message):
    """A capture started, progressed or ended (posted from its worker thread)."""

    def __init__(self, view) -> None:
        super().__init__()
        self.view = view
