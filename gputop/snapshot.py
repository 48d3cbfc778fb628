"""One headless reading of every GPU, as a JSON-ready document (schema in docs/snapshot.md).

``SCHEMA_VERSION`` changes whenever a field is renamed, removed or changes meaning; adding a
field does not change it. Readers should ignore fields they do not know.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gputop import __version__
from gputop.model import DeviceInfo, GpuSample
from gputop.model.host import HostSample
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample, AgentState
from gputop.sources.nvml import Capabilities, NvmlSource
from gputop.sources.watchdog import Watchdog
from gputop.vocab.budget import JSON_DECIMALS

SCHEMA_VERSION = 1
SETTLE_S = 0.25
"""Gap between the two readings a snapshot takes: GPM metrics (100 ms apart at least) and NVLink
rates need two samples."""


def jsonable(obj: Any) -> Any:
    """Dataclasses, mappings and tuples as plain JSON types (mapping proxies included)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return round(obj, JSON_DECIMALS)
    return obj


def sample_pair(
    source: NvmlSource,
    watchdog: Watchdog,
    settle_s: float = SETTLE_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[GpuSample]:
    """Two readings ``settle_s`` apart (so rates and GPM metrics exist); returns the second.

    The monitor reads NVLink (and processes, MIG) at most once per slow tier (2 s) to keep its
    ticks cheap, so a second reading 0.25 s later would reuse the first one's NVLink counters and
    have no rate. Rather than wait a whole tier for every value, the second reading is ``fresh``:
    it reads the slow tier again, and NVLink's cumulative counters give a rate over the 0.25 s.
    Every other value that needs two readings (GPM, 100 ms) is satisfied by the settle time.
    """
    watchdog.call(source.sample)
    sleep(settle_s)
    return watchdog.call(lambda: source.sample(fresh=True))


def build_document(
    devices: Sequence[DeviceInfo],
    caps: Capabilities | None,
    samples: Sequence[GpuSample],
    simulated: str | None = None,
    host: HostSample | None = None,
    agents: AgentsSample | None = None,
    stacks: StacksSample | None = None,
) -> dict[str, Any]:
    """The snapshot document (schema in docs/snapshot.md) for these devices and readings."""
    by_index = {s.index: s for s in samples}
    out = []
    for info in devices:
        out.append(_device(info, by_index.get(info.index)))
    taken = max(s.wall for s in samples) if samples else time.time()
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
        "devices": out,
        "host": jsonable(host) if host is not None else None,
        "agents": [_agent(a) for a in agents.agents] if agents is not None else None,
        "stacks": jsonable(stacks) if stacks is not None else None,
    }


AGENT_STEPS = 50
"""Recent steps per agent in a snapshot (the monitor keeps 512)."""


def _agent(a: AgentState) -> dict[str, Any]:
    d = jsonable(a)
    d["steps"] = d["steps"][-AGENT_STEPS:]
    return d


def write_private_json(path: Path, doc: dict[str, Any]) -> None:
    write_private_text(path, json.dumps(doc, indent=2) + "\n")


def write_private_text(path: Path, text: str) -> None:
    """Write readable by the user only (0600), whole or not at all: into a new file of a name
    no one can plant beforehand (``mkstemp``: exclusive, 0600) in the target's folder, then
    renamed over ``path``, so a full disk or a crash never leaves a truncated file under the
    final name, and a link planted at ``path`` is replaced, never followed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=f".{path.name[:64]}.", suffix=".partial",
                                   dir=path.parent)  # fmt: skip
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def save_readings(
    folder: Path,
    devices: Sequence[DeviceInfo],
    capabilities: Capabilities | None,
    gpus: Sequence[GpuSample],
    simulated: str | None,
    host: HostSample | None = None,
) -> Path:
    """The monitor's save key: the latest readings as a snapshot document in ``folder``,
    named by the newest reading's time (0600; OSError says why it could not be written)."""
    doc = build_document(devices, capabilities, list(gpus), simulated, host=host)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(max(s.wall for s in gpus)))
    path = folder / f"gputop-snapshot-{stamp}.json"
    write_private_json(path, doc)
    return path


def save_stack_dump(folder: Path, text: str) -> Path:
    """The dump key's file: every thread's stack as text (0600), named by the time now."""
    path = folder / f"gputop-stacks-{time.strftime('%Y%m%d-%H%M%S')}.txt"
    write_private_text(path, text)
    return path


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
