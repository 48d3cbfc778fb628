"""Defensive decoding of what agents send: nothing from the socket is trusted.

Every function here is pure and total: any bytes in, either a well-typed value or a count of
what was dropped out, never an exception. Sizes are capped so a hostile or broken peer cannot
make the monitor allocate without bound.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gputop.agent.ranks import LAUNCHER_VARS, RANKS_VERSION, SOURCES
from gputop.agent.wire import MAX_LINE, WIRE_VERSION
from gputop.model.shown import printable
from gputop.model.steps import StepRecord
from gputop.vocab.stacks import STACK_DEPTH

MAX_STEPS_PER_MESSAGE = 1000
MAX_PHASES = 64
MAX_NAME = 64
MAX_NS = 10**15
"""About 11.6 days: a longer duration is nonsense."""
MAX_RANK = 1 << 20
"""Ranks and world sizes above this are nonsense."""
PATH_MOST = 4096
"""The longest working directory taken from an agent (Linux's PATH_MAX)."""
MAX_GC_FULL = 10**6
"""Full collections in one step: each traverses the whole heap, so more is nonsense."""


MAX_THREADS = 512
"""Threads in one stacks message at most (a process with more is cut, not refused)."""
MAX_FRAME_TEXT = 512
MAX_CODE = 160
"""Characters of the source line an agent sends with a thread's innermost frame."""
"""A function or file name longer than this is cut."""


class Dropped(Exception):
    """A line that must be ignored (counted by the caller)."""


def decode_line(line: bytes) -> dict[str, Any]:
    if len(line) > MAX_LINE:
        raise Dropped("line too long")
    try:
        msg = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise Dropped(f"not JSON: {type(e).__name__}") from None
    if not isinstance(msg, dict):
        raise Dropped("not an object")
    if msg.get("v") != WIRE_VERSION:
        raise Dropped(f"wire version {msg.get('v')!r}")
    if not isinstance(msg.get("type"), str):
        raise Dropped("no type")
    return msg


def _int(v: Any, lo: int = 0, hi: int = MAX_NS) -> int | None:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        return None
    return v


def _opt_int(v: Any) -> int | None:
    return None if v is None else _int(v, 0, 10**18)


def _name(v: Any) -> str | None:
    return v if isinstance(v, str) and 0 < len(v) <= MAX_NAME and v.isprintable() else None


def _phases(v: Any) -> dict[str, int] | None:
    if not isinstance(v, dict) or len(v) > MAX_PHASES:
        return None
    out = {}
    for k, d in v.items():
        name, ns = _name(k), _int(d)
        if name is None or ns is None:
            return None
        out[name] = ns
    return out


def parse_steps(msg: dict[str, Any]) -> tuple[list[StepRecord], int]:
    """(valid steps, number of items dropped)."""
    items = msg.get("steps")
    if not isinstance(items, list):
        return [], 1
    out: list[StepRecord] = []
    dropped = max(0, len(items) - MAX_STEPS_PER_MESSAGE)
    for item in items[:MAX_STEPS_PER_MESSAGE]:
        if not isinstance(item, dict):
            dropped += 1
            continue
        step, t0, dur = (
            _int(item.get("step"), 0, 10**12),
            _int(item.get("t0_ns"), 0, 10**19),
            _int(item.get("dur_ns")),
        )
        phases = _phases(item.get("phases", {}))
        flops = item.get("flops")
        if flops is not None and (
            isinstance(flops, bool) or not isinstance(flops, int | float) or flops < 0
        ):
            flops = None
        if step is None or t0 is None or dur is None or phases is None:
            dropped += 1
            continue
        # optional (newer agents): a bad value loses the GC figure, not the step; GC time
        # cannot exceed the step it paused
        gc_ns, gc_full = _int(item.get("gc_ns")), _int(item.get("gc_full"), 0, MAX_GC_FULL)
        if gc_ns is None or gc_full is None:
            gc_ns = gc_full = None
        else:
            gc_ns = min(gc_ns, dur)
        out.append(
            StepRecord(
                step=step,
                t0_ns=t0,
                dur_ns=dur,
                phases=MappingProxyType(phases),
                samples=_opt_int(item.get("samples")),
                tokens=_opt_int(item.get("tokens")),
                flops=float(flops) if flops is not None else None,
                inputs=_opt_int(item.get("inputs")),
                comm_bytes=_opt_int(item.get("comm_bytes")),
                comm_ns=_int(item.get("comm_ns"), 0, dur),  # longer than the step: not kept
                data_cpu_ns=_int(item.get("data_cpu_ns"), 0, dur),
                gc_ns=gc_ns,
                gc_full=gc_full,
                comm_by=_comm_by(item.get("comm_by")),
            )
        )
    return out, dropped


MAX_CALLERS = 8
MAX_CALLER = 96


def _comm_by(raw: Any) -> Mapping[str, tuple[int, ...]]:
    """A step's collectives per caller, checked: at most MAX_CALLERS, a printable name each,
    three counts in range; anything else is left out (the step is kept)."""
    if not isinstance(raw, dict):
        return MappingProxyType({})
    out: dict[str, tuple[int, ...]] = {}
    for name, v in list(raw.items())[:MAX_CALLERS]:
        if not isinstance(name, str) or not name or not isinstance(v, list) or len(v) != 3:
            continue
        counts = tuple(_int(x, 0, MAX_NS) for x in v)
        if any(c is None for c in counts):
            continue
        out[printable(name, MAX_CALLER)] = tuple(c for c in counts if c is not None)
    return MappingProxyType(out)


def _text_of(v: Any, limit: int = MAX_FRAME_TEXT) -> str | None:
    return v[:limit] if isinstance(v, str) and v else None


def parse_stacks(msg: dict[str, Any]) -> list[tuple[int, str, bool, list]] | None:
    """A ``stacks`` message: (tid, thread name, active, frames as (name, file, line) innermost
    first) per thread, at most MAX_THREADS threads of STACK_DEPTH frames, names cut to
    MAX_FRAME_TEXT; None when it is not one (a malformed frame or thread is left out)."""
    items = msg.get("threads")
    if not isinstance(items, list):
        return None
    out = []
    for t in items[:MAX_THREADS]:
        if not isinstance(t, dict) or not isinstance(t.get("frames"), list):
            continue
        tid = _int(t.get("tid"), 0, 1 << 32)
        name = _text_of(t.get("name"), MAX_NAME) or "?"
        frames: list[tuple[Any, ...]] = []
        for f in t["frames"][:STACK_DEPTH]:
            if not isinstance(f, list) or len(f) not in (3, 4):
                break
            fn, file, line = _text_of(f[0]), _text_of(f[1]), _int(f[2], 0, 1 << 31)
            if fn is None or file is None:
                break
            code = _text_of(f[3], MAX_CODE) if len(f) == 4 and not frames else None
            frames.append((fn, file, line, printable(code, MAX_CODE)) if code else (fn, file, line))
        if tid is None:
            continue
        out.append((tid, name if name.isprintable() else "?", t.get("active") is True, frames))
    return out


def parse_gpu(msg: dict[str, Any]) -> tuple[list[tuple[int, str, int]], int]:
    items = msg.get("phases")
    if not isinstance(items, list):
        return [], 1
    out, dropped = [], 0
    for item in items[: MAX_STEPS_PER_MESSAGE * 8]:
        if not isinstance(item, dict):
            dropped += 1
            continue
        step, name, ns = (
            _int(item.get("step"), 0, 10**12),
            _name(item.get("phase")),
            _int(item.get("gpu_ns")),
        )
        if step is None or name is None or ns is None:
            dropped += 1
            continue
        out.append((step, name, ns))
    return out, dropped


def parse_heartbeat(msg: dict[str, Any]) -> dict[str, Any] | None:
    def seconds(v: Any) -> float | None:
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1e9:
            return None
        return float(v)

    step = _int(msg.get("step"), 0, 10**12)
    if step is None:
        return None
    phase = msg.get("open_phase")
    return {
        "step": step,
        "open_phase": _name(phase) if phase is not None else None,
        "open_age_s": seconds(msg.get("open_age_s")),
        "since_step_s": seconds(msg.get("since_step_s")),
        "errors": _int(msg.get("errors"), 0, 10**12) or 0,
    }


def parse_hello(msg: dict[str, Any]) -> dict[str, Any] | None:
    agent = msg.get("agent")
    if not isinstance(agent, dict):
        return None
    pid = _int(agent.get("pid"), 1, 1 << 31)
    if pid is None:
        return None
    argv = agent.get("argv")
    argv = tuple(a[:500] for a in argv[:64] if isinstance(a, str)) if isinstance(argv, list) else ()
    host = agent.get("hostname")
    cwd = agent.get("cwd")

    def rank(k: str) -> int | None:
        return _int(agent.get(k), 0, MAX_RANK) if agent.get(k) is not None else None

    ranks = parse_ranks(agent.get("ranks"))
    dist = ranks["dist"] if ranks is not None else None
    return {
        "pid": pid,
        "argv": argv,
        "cwd": cwd if isinstance(cwd, str) and 0 < len(cwd) <= PATH_MOST else None,
        "hostname": host[:255] if isinstance(host, str) else None,
        "rank": dist["rank"] if dist else rank("rank"),
        "local_rank": rank("local_rank"),
        "world_size": dist["world_size"] if dist else rank("world_size"),
        "python": _version(agent.get("python")),
        "gputop": _version(agent.get("gputop")),
        "ranks": ranks,
    }


def parse_ranks(v: Any) -> dict[str, Any] | None:
    """The hello's optional ``ranks`` object (docs/agent-wire.md): where the rank came from,
    the process group's rank and world size, the launcher variables seen. Another version, or
    a bad value, reads as unknown; only the known variable names are looked up."""
    if not isinstance(v, dict) or v.get("v") != RANKS_VERSION:
        return None
    source = v.get("source")
    dist = v.get("dist")
    d = None
    if isinstance(dist, dict):
        r, w = _int(dist.get("rank"), 0, MAX_RANK), _int(dist.get("world_size"), 1, MAX_RANK)
        if r is not None and w is not None and r < w:
            d = {"rank": r, "world_size": w, "backend": _name(dist.get("backend"))}
    raw = v.get("launcher")
    launcher = {}
    if isinstance(raw, dict):
        for k in LAUNCHER_VARS:
            n = _int(raw.get(k), 0, MAX_RANK)
            if n is not None:
                launcher[k] = n
    return {
        "source": source if source in SOURCES else None,
        "dist": d,
        "launcher": MappingProxyType(launcher),
    }


def _version(v: Any) -> str | None:
    """A version string such as 3.11.7: short, printable, nothing else."""
    if not isinstance(v, str) or not 0 < len(v) <= 32:
        return None
    return v if all(c.isalnum() or c in ".+-_" for c in v) else None


def parse_fingerprint(msg: dict[str, Any]) -> dict[str, Any] | None:
    """Only flat scalars (and one level of nesting) of bounded size are kept."""
    config = msg.get("config")
    if not isinstance(config, dict):
        return None
    out: dict[str, Any] = {}
    for k, v in list(config.items())[:64]:
        if _name(k) is None:
            continue
        if isinstance(v, dict):
            inner = {ik: iv for ik, iv in list(v.items())[:32] if _name(ik) and _scalar(iv)}
            out[k] = MappingProxyType(inner)
        elif _scalar(v):
            out[k] = v
    return out


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, bool | int | float) or (isinstance(v, str) and len(v) <= 200)


CAPTURE_STATUSES = ("ok", "partial", "failed")


def _text(v: Any, limit: int = 500) -> str:
    return v[:limit] if isinstance(v, str) else ""


def parse_reply(msg: dict[str, Any]) -> dict[str, Any] | None:
    """An ``ack`` or ``capture_done`` from an agent, checked field by field: file names must be
    plain names (no path), statuses from the known set, steps two integers."""
    rid = msg.get("id")
    if not isinstance(rid, str) or not 0 < len(rid) <= 64:
        return None
    if msg["type"] == "ack":
        return {"type": "ack", "id": rid, "ok": msg.get("ok") is True,
                "message": _text(msg.get("message"))}  # fmt: skip
    status = msg.get("status")
    if status not in CAPTURE_STATUSES:
        return None
    files = msg.get("files")
    names = [
        f for f in (files if isinstance(files, list) else [])[:64]
        if isinstance(f, str) and 0 < len(f) <= 255 and "/" not in f and f not in (".", "..")
        and "\0" not in f
    ]  # fmt: skip
    steps = msg.get("steps")
    pair = None
    if isinstance(steps, list) and len(steps) == 2:
        a, b = _int(steps[0]), _int(steps[1])
        pair = (a, b) if a is not None and b is not None else None
    return {
        "type": "capture_done",
        "id": rid,
        "status": status,
        "message": _text(msg.get("message")),
        "files": names,
        "steps": pair,
        "torch": _text(msg.get("torch"), 64) or None,
        "python": _text(msg.get("python"), 64) or None,
    }
