"""The PromQL `gputop fleet` asks, written once: deploy/prometheus/gputop-fleet.yml records the
same expressions (tests/integration/test_fleet_rules.py holds the two together), so the screen
and the alert judge a node by one measure."""

from __future__ import annotations

import json

from gputop.vocab.reasons import THROTTLING

WINDOW = "2m"
"""The rate window: long enough to span several steps of a slow job at a 15-s scrape."""
HUNG_PHASE_S = 600
"""A rank in one phase this long is stuck (PyTorch's default NCCL timeout; the alert rules'
GputopRankStuckInPhase)."""


def selector(job: str | None, *matchers: str) -> str:
    """``{training_job="JOB",...}``: the job's label matcher (quoted as PromQL reads a string,
    whatever the name holds) and any others."""
    parts = ([f"training_job={json.dumps(job)}"] if job is not None else []) + list(matchers)
    return "{" + ",".join(parts) + "}"


def rank_work(job: str | None) -> str:
    """Each rank's work per step (s): its step time less its grad_sync wait, per step."""
    s = selector(job)
    sync = selector(job, 'phase="grad_sync"')
    return (
        f"(rate(gputop_step_seconds_total{s}[{WINDOW}]) - ("
        f"sum without (phase) (rate(gputop_phase_seconds_total{sync}[{WINDOW}])) "
        f"or rate(gputop_step_seconds_total{s}[{WINDOW}]) * 0)) "
        f"/ (rate(gputop_steps_total{s}[{WINDOW}]) > 0)"
    )


def verdicts(job: str | None) -> str:
    """Each node's principal bound (the state set's 1)."""
    return f"gputop_verdict{selector(job)} == 1"


def shares(job: str | None) -> str:
    """Each node's step-time budget, slice by slice."""
    return f"gputop_step_time_share_ratio{selector(job)}"


def stuck(job: str | None) -> str:
    """Ranks in one phase for over HUNG_PHASE_S."""
    return f"gputop_open_phase_age_seconds{selector(job)} > {HUNG_PHASE_S}"


def throttled(job: str | None) -> str:
    """GPUs held by a throttling clock-event reason now."""
    reasons = "|".join(sorted(THROTTLING))
    return f"gputop_gpu_throttle{selector(job, f'reason=~{json.dumps(reasons)}')} == 1"


QUERIES = {"work": rank_work, "verdict": verdicts, "shares": shares, "stuck": stuck,
           "throttled": throttled}  # fmt: skip
"""Every query one reading of the fleet makes, by name."""
