"""Statistics over agent steps, shared by the panes and the verdict. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from gputop.model.steps import PIPELINE, StepRecord
from gputop.model.window import percentile

WINDOW = 50
"""Steps the statistics look at (the first step, which includes start-up, is skipped)."""
PEAK_DENSE_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12, "T4": 65e12}
"""Peak dense bf16 (fp16 on T4) FLOP/s by board, for MFU."""


def usable(steps: Sequence[StepRecord]) -> list[StepRecord]:
    return list(steps[1:])[-WINDOW:]


def phase_shares(steps: Sequence[StepRecord]) -> list[tuple[str, float]]:
    """(phase, share of step time) in pipeline order, custom phases after, then unmarked."""
    total = sum(s.dur_ns for s in steps)
    if not total:
        return []
    sums: dict[str, int] = {}
    for s in steps:
        for name, ns in s.phases.items():
            sums[name] = sums.get(name, 0) + ns
    order = [p for p in PIPELINE if p in sums] + sorted(set(sums) - set(PIPELINE))
    shares = [(p, sums[p] / total) for p in order]
    unmarked = max(0.0, 1.0 - sum(share for _, share in shares))
    if unmarked > 0.005:
        shares.append(("unmarked", unmarked))
    return shares


def median_ms(values: Sequence[float]) -> float | None:
    return percentile(sorted(values), 50) / 1e6 if values else None


def work_ns(s: StepRecord) -> int:
    """The step minus time waiting in gradient sync: what this rank itself had to do."""
    return s.dur_ns - s.phases.get("grad_sync", 0)


def peak_flops(gpu_name: str | None) -> float | None:
    if not gpu_name:
        return None
    return next((v for k, v in PEAK_DENSE_BF16.items() if k in gpu_name), None)
