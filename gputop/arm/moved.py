"""What moved between a hang's two dumps (``arm/armed``: one at once, one 30 s later): each
thread whose stack changed, and how many stayed where they were. A thread still in the same
frames 30 s later is where the job waits; one that moved is alive, and may be what it waits for.

Reads the two dumps' ``stacks.json`` (gputop's own files in the private capture root), bounded
in size; whatever does not parse as a dump is said, never raised. Pure but for the reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_READ = 64 << 20
SHOWN = 16
"""Threads that moved, named at most."""


def moved(first: Path, second: Path) -> dict[str, Any]:
    """{"still": threads in the same frames, "moved": ["pid P thread NAME: A -> B", ...],
    "new": threads only in the second, "gone": only in the first} or {"error": why}."""
    try:
        a, b = _threads(first / "stacks.json"), _threads(second / "stacks.json")
    except (OSError, ValueError, TypeError, KeyError, RecursionError) as e:
        return {"error": f"cannot compare the two dumps: {type(e).__name__}: {e}"[:300]}
    still, went = 0, list[str]()
    for key, frames in b.items():
        before = a.get(key)
        if before is None:
            continue
        if before == frames:
            still += 1
        elif len(went) < SHOWN:
            went.append(f"pid {key[0]} thread {key[2]}: {_top(before)} -> {_top(frames)}")
    return {"still": still, "moved": went, "new": len(b.keys() - a.keys()),
            "gone": len(a.keys() - b.keys())}  # fmt: skip


def _threads(path: Path) -> dict[tuple[int, int, str], tuple[str, ...]]:
    with open(path, "rb") as fh:
        raw = fh.read(MAX_READ + 1)
    if len(raw) > MAX_READ:
        raise ValueError(f"{path.name} is over {MAX_READ >> 20} MiB")
    out = {}
    for proc in json.loads(raw):
        for t in proc.get("threads") or ():
            frames = tuple(f"{f['name']} ({f['file']}:{f['line']})" for f in t["frames"])
            out[(int(proc["pid"]), int(t["tid"]), str(t["name"])[:64])] = frames
    return out


def _top(frames: tuple[str, ...]) -> str:
    return frames[0] if frames else "no frames"
