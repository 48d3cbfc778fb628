"""The job's own clocks: each step's parts timed by the script itself, so the bench compares
gputop's budget with what the job measured in that run, not with the share it was built to
have (issue 52: truth measured, not designed).

A script marks its parts (``with clocks.part("data"): x, y = next(it)``, or ``start`` and
``stop`` from a framework's callbacks) and ends each step (``clocks.step()``); whatever the
step spent outside its parts is the loop's own time, as it is in gputop's budget. Garbage
collections are timed by ``gc.callbacks`` wherever they run and taken out of the part they
ran in (gputop's agent times them the same way). The slices are gputop's names: data, h2d,
compute, comms (a collective's whole wait: gputop splits it into comms and straggler), eval,
checkpoint, log, gc, loop.

Nothing is written unless ``CORPUS_CLOCKS`` names a directory: then each process appends one
JSON line per step to ``<dir>/<pid>.jsonl``: ``{"t": wall time at its end, "dur": seconds,
"parts": {slice: seconds}}``, and one when a long part begins (``LONG_PARTS``: ``{"t", "open":
slice, "since": seconds into the step, "parts": so far}``). Plain Python, no gputop: the
scripts stay ones written elsewhere.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar, cast

SLICES = ("data", "h2d", "compute", "comms", "eval", "checkpoint", "log", "gc", "loop")
ENV = "CORPUS_CLOCKS"
LONG_PARTS = ("eval", "checkpoint")
"""Parts that may last seconds: their start is written too, so a step still in one when gputop
last read counts as far as it went (gputop counts an overdue step in its open phase)."""
T = TypeVar("T")
_END = object()


class Clocks:
    """One process's step clocks; a no-op unless ``CORPUS_CLOCKS`` is set. ``steps_only``: the
    steps' lengths alone, for a script whose parts a timer cannot tell apart (DDP waits for its
    all-reduce inside backward): ``shares`` makes nothing of its file, ``step_times`` reads it."""

    def __init__(self, steps_only: bool = False) -> None:
        self.steps_only = steps_only
        where = os.environ.get(ENV)
        self.out = open(os.path.join(where, f"{os.getpid()}.jsonl"), "a") if where else None  # noqa: SIM115
        self.parts: dict[str, float] = {}
        self.gc_s = 0.0
        self._gc_t0: float | None = None
        self._t0 = time.perf_counter()
        self._open: tuple[str, float, float] | None = None
        if self.out is not None:
            gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        elif self._gc_t0 is not None:
            self.gc_s += time.perf_counter() - self._gc_t0
            self._gc_t0 = None

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Times the block as ``name``, less the collections that ran in it."""
        t0, gc0 = time.perf_counter(), self.gc_s
        self._opened(name, t0)
        try:
            yield
        finally:
            took = time.perf_counter() - t0 - (self.gc_s - gc0)
            self.parts[name] = self.parts.get(name, 0.0) + max(0.0, took)

    def batches(self, loader: Iterable[T]) -> Iterator[T]:
        """``for x, y in clocks.batches(loader):``: each batch's wait timed as data (the
        loader's iterator made in the first), and a step ended each time the loop asks for
        the next batch."""
        it: Iterator[T] | None = None
        while True:
            with self.part("data"):
                it = iter(loader) if it is None else it
                item = next(it, _END)
            if item is _END:
                return
            yield cast(T, item)
            self.step()

    def start(self, name: str) -> None:
        """Starts timing ``name`` until ``stop``: for parts that begin in one callback and end
        in another (a framework's hooks)."""
        self.stop()
        self._open = (name, time.perf_counter(), self.gc_s)
        self._opened(name, self._open[1])

    def _opened(self, name: str, at: float) -> None:
        """A long part began: one line with the step so far (``LONG_PARTS``)."""
        if self.out is not None and name in LONG_PARTS:
            so_far = {"t": time.time(), "open": name, "since": at - self._t0,
                      "parts": {**self.parts, "gc": self.gc_s}}  # fmt: skip
            self.out.write(json.dumps(so_far) + "\n")
            self.out.flush()

    def stop(self) -> None:
        """Ends the part ``start`` began, if one is open."""
        if self._open is not None:
            name, t0, gc0 = self._open
            took = time.perf_counter() - t0 - (self.gc_s - gc0)
            self.parts[name] = self.parts.get(name, 0.0) + max(0.0, took)
            self._open = None

    def step(self) -> None:
        """Ends a step here: writes it, and the next one starts."""
        now = time.perf_counter()
        if self.out is not None:
            line = {"t": time.time(), "dur": now - self._t0}
            if not self.steps_only:
                line["parts"] = {**self.parts, "gc": self.gc_s}
            self.out.write(json.dumps(line) + "\n")
            self.out.flush()
        self.parts, self.gc_s, self._t0 = {}, 0.0, now


def _rows(path: str) -> list[dict] | None:
    """A clocks file's lines (one cut by the kill left out); None when it cannot be read."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    continue  # a line cut by the kill
    except OSError:
        return None
    return rows


def step_times(path: str, end: float, steps: int) -> list[float]:
    """The lengths (seconds) of the last ``steps`` steps that ended by wall time ``end``."""
    rows = _rows(path) or []
    done = [r["dur"] for r in rows if "dur" in r and r["t"] <= end]
    return done[-steps:] if steps > 0 else []


def shares(path: str, end: float, steps: int, open_after: float) -> dict[str, float] | None:
    """The job's shares over its last ``steps`` steps that ended by wall time ``end`` (gputop's
    window: its last reading), and the step in progress then when it has been in a long part
    for over ``open_after`` seconds (gputop counts such a step too); the loop's own time is
    the rest of each step. None without steps, or for a file of steps alone."""
    rows = _rows(path)
    if rows is None or any("dur" in r and "parts" not in r for r in rows):
        return None
    rows = [r for r in rows if r["t"] <= end]
    done = [r for r in rows if "dur" in r][-steps:] if steps > 0 else []
    if not done:
        return None
    counted = [(r["dur"], r["parts"]) for r in done]
    last = rows[-1]
    if "open" in last and end - last["t"] > open_after:
        parts = dict(last["parts"])
        parts[last["open"]] = parts.get(last["open"], 0.0) + end - last["t"]
        counted.append((last["since"] + end - last["t"], parts))
    wall = sum(d for d, _ in counted)
    if wall <= 0:
        return None
    out = dict.fromkeys(SLICES, 0.0)
    for _, parts in counted:
        for name, s in parts.items():
            out[name] += s
    out["loop"] += wall - sum(out.values())
    return {name: max(0.0, s / wall) for name, s in out.items()}
