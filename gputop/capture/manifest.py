"""``manifest.json``: what a capture is, its bounds, how it ended, and what it wrote
(docs/captures.md, gputop/schemas/capture.schema.json). Written when the capture starts and
again when it ends, atomically, so a crash leaves a manifest that says "running"."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gputop import __version__
from gputop.capture.folder import FileEntry, Folder

SCHEMA = "gputop.capture/1"
STATUSES = ("running", "ok", "partial", "failed", "timeout", "cancelled")
VIEWERS = {
    "pyspy-flame": "speedscope (https://www.speedscope.app, open pyspy.speedscope.json) or "
    "any browser for flame.svg",
    "pyspy-dump": "any text viewer: stacks.txt; stacks.json for scripts",
    "memory-snapshot": "https://pytorch.org/memory_viz (drag the .memory.pickle in)",
    "nsys": "Nsight Systems (nsys-ui) on your own machine: copy the .nsys-rep down",
    "torch-trace": "Perfetto (https://ui.perfetto.dev) opens each .pt.trace.json.gz; Holistic "
    "Trace Analysis takes the folder as its trace_dir",
}


@dataclass(frozen=True)
class Progress:
    """How far a running capture is: ``done`` of ``total`` ``unit`` (s or steps)."""

    done: float
    total: float
    unit: str


@dataclass(frozen=True)
class CaptureTarget:
    """One process of a capture, with its own status: one can fail while the others are captured."""

    pid: int
    role: str
    """main, worker, rank or child."""
    start_ticks: int | None = None
    rank: int | None = None
    python: str | None = None
    torch: str | None = None
    steps: tuple[int, int] | None = None
    status: str = "running"
    note: str = ""


@dataclass(frozen=True)
class Tool:
    """The external tool behind a capture: its exact command line and the end of its stderr, to
    explain a failure."""

    name: str
    version: str | None = None
    argv: tuple[str, ...] = ()
    stderr_tail: str = ""


@dataclass(frozen=True)
class Manifest:
    """What a capture folder says about itself (``manifest.json``): "running" until ``ended`` says
    how it went."""

    id: str
    kind: str
    bounds: dict[str, Any]
    requested_at: float
    status: str = "running"
    reason: str = ""
    """Why it is not "ok", in words."""
    ended_at: float | None = None
    targets: tuple[CaptureTarget, ...] = ()
    files: tuple[FileEntry, ...] = ()
    tool: Tool | None = None
    options: dict[str, Any] = field(default_factory=dict)
    trigger: dict[str, Any] | None = None
    """What fired an armed capture (``gputop/arm``): the trigger, why, the verdict and budget
    at that moment, the steps before it and, at the end, after it; None: taken by hand."""

    def ended(self, status: str, reason: str = "", **changes: Any) -> Manifest:
        assert status in STATUSES
        return replace(self, status=status, reason=reason, ended_at=time.time(), **changes)


def _utc(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def _lists(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _lists(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_lists(v) for v in obj]
    return obj


def document(m: Manifest) -> dict[str, Any]:
    doc = _lists(asdict(m))
    doc["requested_at"] = _utc(m.requested_at)
    doc["ended_at"] = _utc(m.ended_at)
    return {
        "schema": SCHEMA,
        "gputop_version": __version__,
        **doc,
        "view_hint": VIEWERS.get(m.kind, ""),
    }


def write(folder: Folder, m: Manifest) -> None:
    data = json.dumps(document(m), indent=2).encode() + b"\n"
    folder.write("manifest.json", data)
