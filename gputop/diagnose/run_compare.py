"""This run against the job's last one: did the change help, by how much, and was it the lever.

The last run is what the job's memory kept of it (``Remembered``: its pace, its settings, its
verdict and the lever it offered first, with the saving predicted); this run is its pace so
far. Compared: the mean step with an interval that holds for correlated steps
(``batch_means``), each slice's share with its own, and the settings and arguments that
differ. A setting that changed names a slice by its words (SETTING_SLICES); when that is the
slice the last run's principal lever saves from, the lever was applied, and its prediction
is set against the measurement; failing a word, when that slice shrank beyond its interval
and exactly one change names no slice, that change is taken for the lever. Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from gputop.diagnose.batch_means import Change, Z, change_between
from gputop.diagnose.run_steps import RunSummary
from gputop.model.job_key import JobKey, is_option
from gputop.vocab import budget as b

SETTING_SLICES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("pin",), b.H2D),
    (("dataloader", "worker", "workers", "prefetch", "persistent"), b.DATA),
    (("eval", "val", "valid", "validation"), b.EVAL),
    (("save", "ckpt", "checkpoint"), b.CHECKPOINT),
    (("log", "logging", "print", "wandb", "tensorboard"), b.LOG),
    (("gc",), b.GC),
    (("parallel", "bucket", "ddp", "fsdp", "shard", "backend", "allreduce", "overlap"), b.COMMS),
    (("compiled", "compile", "autocast", "dtype", "precision", "matmul", "cudnn", "amp",
      "anomaly", "bf16", "fp16"), b.COMPUTE),
    (("threads",), b.LOOP),
    (("straggler", "slow", "imbalance", "balance", "skew", "uneven"), b.STRAGGLER),
)  # fmt: skip
"""A setting's or an argument's words -> the slice it is a knob of (the first that matches)."""
SLICES_SHOWN = 4
"""Slices a comparison lists at most: the losses that moved most, then compute (which moves
by what they did)."""
MOVED_LEAST = 0.02
"""A slice's share moved by this much or more is listed even when its interval holds 0."""


@dataclass(frozen=True, slots=True)
class RememberedLever:
    """The lever the last run offered first, as remembered."""

    text: str
    saves: str | None
    """The slice it saves from."""
    share: float | None
    """The share of the step it was predicted to save, and its least and most (None: the
    budget could not size it, a knob such as DDP's bucket size)."""
    low: float | None
    high: float | None


@dataclass(frozen=True, slots=True)
class Remembered:
    """What the job's memory keeps of one run."""

    key: JobKey
    started: float
    """Wall clock (Unix seconds) of its first reading, and of the last time it was kept."""
    ended: float
    run: RunSummary
    settings: Mapping[str, str]
    """The job's setup as the agent read it, flattened ("dataloader.num_workers": "4")."""
    principal: str | None
    """The verdict's principal bound when it was last kept."""
    lever: RememberedLever | None
    version: str
    """gputop's version that kept it."""


@dataclass(frozen=True, slots=True)
class SliceChange:
    """One slice's share in the last run and in this one."""

    name: str
    before: float
    after: float
    margin: float
    """Z standard errors of the difference of the shares."""

    @property
    def distinguishable(self) -> bool:
        return abs(self.after - self.before) > self.margin


@dataclass(frozen=True, slots=True)
class LeverCheck:
    """The last run's lever, applied: its prediction against the measurement."""

    lever: RememberedLever
    setting: str
    before: str
    after: str
    by_words: bool = True
    """The setting's words name the lever's slice; False: the slice shrank and it was the one
    change that names none."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """This run against the job's last: what every output says of the change."""

    last: Remembered
    step: Change
    slices: tuple[SliceChange, ...]
    """The slices that moved most, largest first (at most SLICES_SHOWN)."""
    changed: tuple[tuple[str, str, str], ...]
    """(setting or argument, last run's value, this run's), "" where one had none."""
    lever: LeverCheck | None


def flat_settings(fingerprint: Mapping[str, object] | None) -> dict[str, str]:
    """The agent's fingerprint as settings: scalars, and one level of sections, as text. Names
    in capitals (environment variables) are left out: the memory keeps no environment."""
    out: dict[str, str] = {}
    for k, v in (fingerprint or {}).items():
        if not isinstance(k, str) or k.isupper() or len(out) >= 64:
            continue
        if isinstance(v, Mapping):
            for k2, v2 in v.items():
                if isinstance(k2, str) and _scalar(v2) and len(out) < 64:
                    out[f"{k}.{k2}"[:80]] = str(v2)[:200]
        elif _scalar(v):
            out[k[:80]] = str(v)[:200]
    return out


def _scalar(v: object) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


STEM_LEAST = 5
"""A stem this long names a word that starts with it ("balance": "balanced", "worker":
"workers"); a shorter one only the word itself ("log" is not "logits")."""
MEASURED_AS = {b.STRAGGLER: b.COMMS}
"""A run's shares are summed from its steps, where the wait for a slower rank is inside the
collective's wait: a straggler lever shrinks that."""


def slice_of_setting(name: str) -> str | None:
    """The slice a setting or an argument is a knob of, by its words; None: none known."""
    words = set(re.split(r"[^a-z0-9]+", name.lstrip("-").lower())) - {""}
    return next((where for stems, where in SETTING_SLICES if _named(words, stems)), None)


def _named(words: set[str], stems: tuple[str, ...]) -> bool:
    return any(w == s or (len(s) >= STEM_LEAST and w.startswith(s)) for w in words for s in stems)


def _arg_changes(before: tuple[str, ...], after: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """Options whose values differ ("--num-workers", "0", "4"), by name; what is left as
    positions when the two lists do not pair up."""
    a, b_ = _options(before), _options(after)
    if a is None or b_ is None:
        return [] if before == after else [("arguments", " ".join(before), " ".join(after))]
    return [
        (k, a.get(k, ""), b_.get(k, "")) for k in dict.fromkeys([*a, *b_]) if a.get(k) != b_.get(k)
    ]


def _options(args: tuple[str, ...]) -> dict[str, str] | None:
    """--name value / --name=value / --flag as a mapping; None when a positional argument
    stands outside an option (compared as a whole)."""
    out: dict[str, str] = {}
    name: str | None = None
    for a in args:
        if is_option(a):
            if name is not None:
                out[name] = "on"
            name, eq, value = a.partition("=")
            if eq:
                out[name], name = value, None
        elif name is not None:
            out[name], name = a, None
        else:
            return None
    if name is not None:
        out[name] = "on"
    return out


def compare(
    last: Remembered, now: RunSummary, key: JobKey, settings: Mapping[str, str]
) -> Comparison:
    """This run (``now``, its ``key`` and ``settings``) against ``last``."""
    step = change_between(last.run.step, now.step)
    moved = []
    for name in b.SLICES:
        was, se_was = last.run.shares.get(name, (0.0, 0.0))
        got, se_got = now.shares.get(name, (0.0, 0.0))
        if was or got:
            moved.append(SliceChange(name, was, got, Z * math.hypot(se_was, se_got)))
    shown = sorted(
        (m for m in moved if m.distinguishable or abs(m.after - m.before) >= MOVED_LEAST),
        key=lambda m: (m.name == b.COMPUTE, -abs(m.after - m.before)),
    )[:SLICES_SHOWN]
    changed = [
        (k, last.settings.get(k, ""), settings.get(k, ""))
        for k in dict.fromkeys([*last.settings, *settings])
        if last.settings.get(k) != settings.get(k)
    ] + _arg_changes(last.key.args, key.args)
    return Comparison(last, step, tuple(shown), tuple(changed), _applied(last, changed, moved))


def _applied(
    last: Remembered, changed: list[tuple[str, str, str]], moved: list[SliceChange]
) -> LeverCheck | None:
    """The last run's first lever, if a change applied it (the module docstring)."""
    lever = last.lever
    if lever is None or lever.saves is None:
        return None
    hit = next((c for c in changed if slice_of_setting(c[0]) == lever.saves), None)
    if hit is not None:
        return LeverCheck(lever, *hit)
    saves = MEASURED_AS.get(lever.saves, lever.saves)
    shrank = any(m.name == saves and m.distinguishable and m.after < m.before for m in moved)
    unnamed = [c for c in changed if slice_of_setting(c[0]) is None]
    return LeverCheck(lever, *unnamed[0], by_words=False) if shrank and len(unnamed) == 1 else None
