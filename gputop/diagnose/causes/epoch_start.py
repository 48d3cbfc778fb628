"""A data wait that comes as one long pause at each epoch's start, where the loader starts its
workers anew (``persistent_workers=False``, PyTorch's default): every epoch the new workers
start, copy the dataset and make their first batches while the step waits; the rest of the
epoch they keep up. Found from the agent's data wait of each step (most of the slice in a few
long pauses that recur) and the loader's setting, which says why. A wait spread over every
step is the slice's general cause's (``data.py``). Pure."""

from __future__ import annotations

import statistics

from gputop.diagnose.findings import Cause, Evidence
from gputop.diagnose.lever import sized
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.model.budget import Budget
from gputop.model.setup import loader_setting, loader_workers
from gputop.vocab import budget as slices
from gputop.vocab import steps as phases

SLICE = slices.DATA

PAUSE_MS = 50.0
"""A step's data wait from which it is a pause: starting a worker process takes hundreds of
milliseconds (an interpreter, the dataset copied or re-opened), a batch waited for on time
takes a few."""
PAUSE_TIMES = 5.0
"""...and at least this many times the median step's wait (a loader slow on every step is
not pausing)."""
HOLDS = 0.5
"""Share of the data wait the pauses hold from which they are its cause."""
PAUSES = 2
"""Pauses in the window from which they recur (one could be the first epoch's start)."""

LEVER = (
    "DataLoader(persistent_workers=True): the workers outlive each epoch, so an epoch starts "
    "with workers that are already running"
)


def find(sig: RuleInputs, budget: Budget | None) -> Cause | None:
    """None unless most of the typical rank's data wait is in recurring pauses and its loader
    starts its workers anew each epoch."""
    if budget is None or sig.steps is None:
        return None
    rank = sig.steps.of(budget.typical.pid)
    agent = rank.agent if rank is not None else None
    workers = loader_workers(agent.fingerprint) if agent is not None else None
    if rank is None or agent is None or not workers:
        return None
    if loader_setting(agent.fingerprint, "persistent_workers") is not False:
        return None
    steps = rank.long
    waits = [s.phases.get(phases.DATA_WAIT, 0) / 1e6 for s in steps]
    total = sum(waits)
    if total <= 0:
        return None
    typical = statistics.median(waits)
    floor = max(PAUSE_MS, PAUSE_TIMES * typical)
    pauses = [(i, ms) for i, ms in enumerate(waits) if ms >= floor]
    held = sum(ms for _, ms in pauses)
    if len(pauses) < PAUSES or held < HOLDS * total:
        return None
    every = (pauses[-1][0] - pauses[0][0]) / (len(pauses) - 1)
    each = statistics.median(ms for _, ms in pauses)
    text = (
        f"the data wait comes as a {each:.0f}-ms pause every ~{every:.0f} steps "
        f"({held / total:.0%} of it): each epoch starts its {workers} DataLoader workers anew "
        "(persistent_workers=False)"
    )
    evidence = (
        Evidence(f"{budget.typical.label}: {len(pauses)} data waits of {floor:.0f} ms or more "
                 f"in {len(steps)} steps hold {held / total:.0%} of the wait; the median step "
                 f"waits {typical:.1f} ms", "agent"),
        Evidence(f"its DataLoader: num_workers={workers}, persistent_workers=False", "agent"),
    )  # fmt: skip
    # persistent workers still make each epoch's first batch: one batch's work per worker
    # at most (a step's time each, as they keep up) stays in the pause
    excess = sum(ms - typical for _, ms in pauses)
    r = budget.typical
    step_ms = r.seconds / r.steps * 1000 if r.steps else 0.0
    left = min(excess, len(pauses) * workers * step_ms)
    lever = sized(LEVER, SLICE, (excess - left / 2) / total,
                  ((excess - left) / total, excess / total),
                  f"if each {each:.0f}-ms pause became a wait for one batch")  # fmt: skip
    return Cause(text, evidence, (lever,))
