"""The data model: frozen samples, bounded Timeline, Window statistics. No I/O, no Textual."""

from gputop.model.gpu import DeviceInfo, GpuProcess, GpuSample, MigInfo, MigSample
from gputop.model.ring import Ring
from gputop.model.timeline import DEFAULT_CAPACITY, SeriesKey, Timeline
from gputop.model.window import Window, percentile

__all__ = [
    "DEFAULT_CAPACITY",
    "DeviceInfo",
    "GpuProcess",
    "GpuSample",
    "MigInfo",
    "MigSample",
    "Ring",
    "SeriesKey",
    "Timeline",
    "Window",
    "percentile",
]
