"""One headless reading of every GPU, as a JSON-ready document (schema in docs/snapshot.md).

``SCHEMA_VERSION`` changes whenever a field is renamed, removed or changes meaning; adding a
field does not change it. Readers should ignore fields they do not know.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable, Mapping
from typing import Any

from gputop import __version__
from gputop.model import DeviceInfo, GpuSample
from gputop.sources.nvml import NvmlSource
from gputop.sources.watchdog import Watchdog

SCHEMA_VERSION = 1
SETTLE_S = 0.25
"""Gap between the two readings a snapshot takes: GPM and NVLink rates need two samples."""


def jsonable(obj: Any) -> Any:
    """Dataclasses, mappings and tuples as plain JSON types (mapping proxies included)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return round(obj, 3)
    return obj


def sample_pair(
    source: NvmlSource,
    watchdog: Watchdog,
    settle_s: float = SETTLE_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[GpuSample]:
    """Two readings ``settle_s`` apart (so rates and GPM metrics exist); returns the second."""
    watchdog.call(source.sample)
    sleep(settle_s)
    return watchdog.call(source.sample)


def build_document(
    source: NvmlSource,
    samples: list[GpuSample],
    simulated: str | None = None,
) -> dict[str, Any]:
    caps = source.capabilities
    by_index = {s.index: s for s in samples}
    devices = []
    for info in source.devices:
        sample = by_index.get(info.index)
        devices.append(_device(info, sample))
    taken = samples[0].wall if samples else time.time()
    return {
        "schema_version": SCHEMA_VERSION,
        "gputop_version": __version__,
        "taken_at": dt.datetime.fromtimestamp(taken, dt.timezone.utc).isoformat(),
        "source": {
            "kind": "simulated" if simulated else "nvml",
            "board": simulated,
            "driver_version": caps.driver_version if caps else None,
            "cuda_version": _cuda(caps.cuda_version) if caps else None,
            "capabilities": jsonable(caps) if caps else None,
        },
        "devices": devices,
    }


def _device(info: DeviceInfo, sample: GpuSample | None) -> dict[str, Any]:
    d = jsonable(info)
    if sample is None:
        d["sample"] = None
        return d
    s = jsonable(sample)
    for internal in ("index", "t"):
        s.pop(internal)
    d["sample"] = s
    return d


def _cuda(v: int | None) -> str | None:
    return f"{v // 1000}.{v % 1000 // 10}" if v else None
