"""What a summary read back from a recording must look like before ``merge`` and the report
touch it: one table (``SUMMARY_SHAPE``) of every part's shape, built from a few checks that read as
the types they stand for. A crafted file fails here, as damage, not as a KeyError deep in the
report. Every check is total: any value in, a bool out."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from gputop.record.codec import MAX_INT
from gputop.record.summary import GPU_HELD, GPU_POINT, MAX_BUCKET
from gputop.vocab.budget import SLICES

Check = Callable[[Any], bool]

# ---- the checks ----------------------------------------------------------------------------


def num(v: Any) -> bool:
    """A number JSON gives back: a float, or an int within what the codec writes."""
    return type(v) is float or (type(v) is int and -MAX_INT <= v <= MAX_INT)


def finite(v: Any) -> bool:
    return num(v) and math.isfinite(v)


def count(n: Any) -> bool:
    return type(n) is int and 0 <= n <= MAX_INT


def text(v: Any) -> bool:
    return isinstance(v, str)


def anything(v: Any) -> bool:
    return True


def a_dict(v: Any) -> bool:
    return isinstance(v, dict)


def int_key(k: Any) -> bool:
    """What int() reads back: ASCII digits ("²".isdigit() too), one sign, text at all."""
    return isinstance(k, str) and len(k) < 20 and k.isascii() and k.removeprefix("-").isdigit()


def bucket_key(k: Any) -> bool:
    """A histogram bucket a step time gives (the report takes ``exp`` of it)."""
    return int_key(k) and abs(int(k)) <= MAX_BUCKET


def a_slice(k: Any) -> bool:
    return k in _SLICES


def maybe(check: Check) -> Check:
    return lambda v: v is None or check(v)


def map_of(check: Check, keys: Check = anything) -> Check:
    return lambda m: isinstance(m, dict) and all(keys(k) and check(v) for k, v in m.items())


def list_of(check: Check) -> Check:
    return lambda xs: isinstance(xs, list) and all(check(x) for x in xs)


def row(*checks: Check) -> Check:
    """A list of exactly these items, each its own check."""
    return lambda xs: (
        isinstance(xs, list)
        and len(xs) == len(checks)
        and all(c(x) for c, x in zip(checks, xs, strict=True))
    )


def record(required: Mapping[str, Check], optional: Mapping[str, Check] | None = None) -> Check:
    """A dict with each ``required`` key, and each ``optional`` one absent (files written before
    it) or right; other keys are left alone (files written after)."""
    extra = optional or {}
    return lambda d: (
        isinstance(d, dict)
        and all(k in d and c(d[k]) for k, c in required.items())
        and all(k not in d or c(d[k]) for k, c in extra.items())
    )


def both(*checks: Check) -> Check:
    return lambda v: all(c(v) for c in checks)


# ---- the table -------------------------------------------------------------------------------

_SLICES = frozenset(SLICES)
SHARES = map_of(num, keys=a_slice)
"""A budget: slice -> share, only slices the budget has."""
FINDING = record(
    {
        "confidence": num,
        "summary": text,
        "levers": list_of(text),
        "evidence": list_of(record({"text": text, "source": text})),
    },
    {"cause": maybe(record({"text": text}))},  # newer recordings: the cause's one line
)
CHANGE = row(num, maybe(text), num, text)
"""When the principal changed: the time, the bound (or none), its confidence, the note."""
EVENT = row(num, anything, text, a_dict)
HIST = map_of(count, keys=bucket_key)
RANK = record(
    {
        **dict.fromkeys(("steps", "seconds", "flops", "flops_s", "samples", "tokens"), num),
        "hist": HIST,
        "phases": map_of(num),
    },
    {"work_hist": maybe(HIST), "fingerprint": a_dict},
)
GPU = record(dict.fromkeys(("n", "util", "sm", "power", "n_sm"), num), {"temp_max": maybe(num)})
POINT = row(num, num, num, num, map_of(num))
BUDGET_POINT = both(
    record({"start": num, "ranks": map_of(row(num, count, SHARES), keys=int_key)}),
    lambda b: isinstance(b.get("typical"), str) and b["typical"] in b["ranks"],
)
"""One interval's budget: its start, its typical rank (a rank's key: a crafted list or
number is damage, not a lookup) among its ranks, each [seconds, steps, {slice: share}]
(absent from files written before it)."""
GPU_BIN = row(
    *(num,) * GPU_HELD,
    map_of(num, keys=lambda k: text(k) and len(k) <= 64),
    *(anything,) * (len(GPU_POINT) - GPU_HELD - 1),
)
"""One GPU's 10-s bin (``summary.GPU_POINT``)."""
SUMMARY_SHAPE = both(
    record(
        {
            "verdict_s": map_of(num),
            "throttle_s": map_of(map_of(num)),
            "findings": map_of(FINDING),
            "changes": list_of(CHANGE),
            "secondary": list_of(lambda c: isinstance(c, list) and len(c) == 3),
            "events": list_of(EVENT),
            "ranks": map_of(RANK, keys=int_key),
            "gpus": map_of(GPU, keys=int_key),
            "carry": a_dict,
        },
        {
            "t0": maybe(num),
            "t1": maybe(num),
            "budget_s": map_of(SHARES),
            "beside": map_of(FINDING),
            "points": map_of(POINT, keys=int_key),
            "budget_points": map_of(BUDGET_POINT, keys=int_key),
            "gpu_points": map_of(map_of(GPU_BIN, keys=int_key), keys=int_key),
        },
    ),
    lambda p: (p.get("t0") is None) == (p.get("t1") is None),  # merge takes both or neither
)
"""Every part ``merge`` and the report read, with the types they expect."""
