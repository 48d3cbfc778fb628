"""One remembered run as JSON, both ways. Every file of the memory may have been written by
someone else (another user with the same path, a tool, a disk error): reading takes nothing on
trust, and anything that is not a run as gputop writes it is refused with the reason, never a
traceback. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gputop.diagnose import Mean, Remembered, RememberedLever, RunSummary
from gputop.model.job_key import JobKey
from gputop.vocab import budget as b

FORMAT = 1
"""The memory's file format; a file of another is left alone."""
TEXT_MOST = 500
SETTINGS_MOST = 64
ARGS_MOST = 64
STEPS_MOST = 10**12
SECONDS_MOST = 1e6
"""A mean step of more than 11 days is no measurement."""
WALL_MOST = 1e11
"""Unix seconds past the year 5000."""


class Damaged(ValueError):
    """A run or a file that is not as gputop writes it: the reason."""


def run_doc(r: Remembered, run_id: str) -> dict[str, Any]:
    lever = r.lever
    return {
        "id": run_id,
        "started": r.started,
        "ended": r.ended,
        "args": list(r.key.args),
        "step": {
            "mean_s": r.run.step.value,
            "error_s": r.run.step.error,
            "steps": r.run.step.steps,
        },
        "shares": {k: [v[0], v[1]] for k, v in r.run.shares.items()},
        "settings": dict(r.settings),
        "principal": r.principal,
        "lever": None
        if lever is None
        else {
            "text": lever.text,
            "saves": lever.saves,
            "share": lever.share,
            "low": lever.low,
            "high": lever.high,
        },
        "version": r.version,
    }


def key_doc(k: JobKey) -> dict[str, Any]:
    return {"script": k.script, "world_size": k.world_size}


def _text(v: Any, what: str, empty: bool = False) -> str:
    if not isinstance(v, str) or len(v) > TEXT_MOST or (not v and not empty):
        raise Damaged(f"{what} is not a text of at most {TEXT_MOST} characters")
    return v


def _number(v: Any, what: str, most: float, least: float = 0.0) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise Damaged(f"{what} is not a number")
    if not least <= v <= most:
        raise Damaged(f"{what} is out of range")
    return float(v)


def _maybe(v: Any, what: str) -> float | None:
    """A share of the step, or None where the lever was not sized."""
    return None if v is None else _number(v, what, 1.0)


def _count(v: Any, what: str, most: int) -> int:
    if type(v) is not int or not 0 <= v <= most:
        raise Damaged(f"{what} is not a count")
    return v


def _map(v: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise Damaged(f"{what} is not a mapping")
    return v


def key_of(doc: Any) -> JobKey:
    d = _map(doc, "the job")
    return JobKey(
        _text(d.get("script"), "the job's script"),
        _count(d.get("world_size"), "the job's world size", 1 << 20) or 1,
        (),
    )


def run_of(doc: Any, key: JobKey) -> tuple[str, Remembered]:
    """(its id, the run) from one of a file's runs."""
    d = _map(doc, "a run")
    run_id = _text(d.get("id"), "a run's id")
    args = d.get("args")
    if not isinstance(args, list) or len(args) > ARGS_MOST:
        raise Damaged("a run's arguments are not a list")
    step = _map(d.get("step"), "a run's step")
    mean = Mean(
        _number(step.get("mean_s"), "a run's mean step", SECONDS_MOST),
        _number(step.get("error_s"), "a run's step error", SECONDS_MOST),
        _count(step.get("steps"), "a run's steps", STEPS_MOST),
    )
    raw = _map(d.get("shares"), "a run's shares")
    shares = {}
    for name in b.SLICES:
        pair = raw.get(name, [0.0, 0.0])
        if not isinstance(pair, list) or len(pair) != 2:
            raise Damaged(f"a run's {name} share is not [share, error]")
        shares[name] = (_number(pair[0], "a share", 1.0), _number(pair[1], "a share's error", 1.0))
    settings = _map(d.get("settings"), "a run's settings")
    if len(settings) > SETTINGS_MOST:
        raise Damaged("a run has too many settings")
    principal = d.get("principal")
    lever_doc = d.get("lever")
    lever = None
    if lever_doc is not None:
        lv = _map(lever_doc, "a run's lever")
        saves = lv.get("saves")
        lever = RememberedLever(
            _text(lv.get("text"), "a lever's text"),
            saves if saves in b.SLICES else None,
            _maybe(lv.get("share"), "a lever's saving"),
            _maybe(lv.get("low"), "a lever's least saving"),
            _maybe(lv.get("high"), "a lever's most saving"),
        )
    started = _number(d.get("started"), "a run's start", WALL_MOST)
    ended = _number(d.get("ended"), "a run's end", WALL_MOST)
    return run_id, Remembered(
        key=JobKey(key.script, key.world_size, tuple(_text(a, "an argument", True) for a in args)),
        started=started,
        ended=max(started, ended),
        run=RunSummary(mean, shares),
        settings={
            _text(k, "a setting's name"): _text(v, "a setting", True) for k, v in settings.items()
        },
        principal=_text(principal, "a run's verdict") if principal is not None else None,
        lever=lever,
        version=_text(d.get("version"), "a run's gputop version"),
    )


def file_doc(key: JobKey, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"format": FORMAT, "job": key_doc(key), "runs": runs}


def runs_of(doc: Any) -> tuple[JobKey, list[tuple[str, Remembered]], int]:
    """A file's job, its runs oldest first, and how many of its runs were damaged (left out);
    a file whose frame is damaged raises ``Damaged``."""
    d = _map(doc, "the file")
    if d.get("format") != FORMAT:
        raise Damaged(f"its format is not {FORMAT}")
    key = key_of(d.get("job"))
    runs = d.get("runs")
    if not isinstance(runs, list):
        raise Damaged("its runs are not a list")
    out = []
    damaged = 0
    for r in runs:
        try:
            out.append(run_of(r, key))
        except Damaged:
            damaged += 1  # one run damaged: the others still tell
    return key, sorted(out, key=lambda x: x[1].started), damaged
