"""The thresholds the panes and the levers share with the rules, each defined once: a pane
colours a number by the bar the verdict holds it to, and a lever sized by a share uses the
verdict's own floor. The one surface the screens read the diagnosis's bars from (as nvitop's
``api`` is its TUI's); a threshold only one rule reads stays beside that rule. Pure: imports
nothing."""

from __future__ import annotations

# the step-time budget (diagnose/budget.py, diagnose/verdict.py)
FLOOR = 0.10
"""A loss slice under this share of wall time is no bound: below it the job is compute-bound
(TensorFlow Profiler calls under 5% of the step "not input-bound" and 5-20% "moderately"; ten
points is where a fix pays for the change it asks)."""
HELD_FLOOR = 0.8 * FLOOR
"""A loss slice shown as the principal stays while it is at least this (8%): two readings
either side of the floor do not flip the verdict, and a loss that has settled under it (a
start-up wait that scrolled out of the window) gives way."""

# the step's slices, by the agent's clock (diagnose/rules/steps.py)
DATA_WAIT_WARN = 0.05
"""Batch wait over this share of the step starves the GPU (docs/facts/bounds.md, "data-input")."""
COMMS_SHARE = 0.20
"""Gradient sync over this share of the step is comms-bound (docs/facts/bounds.md, "comms")."""
SIDE_SHARE = 0.10
"""Checkpoint, logging or garbage collection over this share of step time."""
IO_PRESSURE = 10.0
"""PSI io "some" avg10 (%): time some task waited on storage."""
LAUNCH_UTIL = 80.0
"""GPU utilisation (%) from which a GPU that does little is being fed tiny kernels..."""
TINY_KERNELS = 0.5
"""... when its SMs are busy under this share of its utilisation..."""

# the GPU (diagnose/signals/gpu.py, diagnose/rules/gpu.py)
LOWERED_LIMIT = 0.95
"""An enforced power limit under this share of the card's default is a box capped on purpose."""
SLOWDOWN_MARGIN_C = 2
"""Degrees under the board's slowdown temperature that count as at it."""
COMPUTE_CLOCK = 0.9
"""SM clock over its max from which a busy GPU computes at full speed."""

# the host (diagnose/signals/host.py, diagnose/rules/host.py, diagnose/risks.py)
MEM_NEAR = 0.9
"""Working set over this share of the cgroup limit: one allocation spike from an OOM kill."""
MEM_RISK = 0.8
"""Working set share of the limit from which it is a risk (the host pane warns from here)."""
MEM_PRESSURE = 10.0
"""PSI memory "some" avg10 (%): time some task stalled on reclaim."""
RUNNABLE_PER_CPU = 1.5
"""Threads ready to run per effective CPU from which they fight over the CPUs..."""
RUNQ_PER_CPU = 0.5
"""... together with this much run-queue wait (seconds per second) per effective CPU."""
CPU_THROTTLED = 0.2
"""Share of CFS periods throttled from which the cgroup's CPU quota holds the job back."""
WORKER_PEGGED = 0.85
"""CPU (cores) from which one DataLoader worker counts as pegged."""
WORKERS_WAIT = 0.3
"""Mean CPU per DataLoader worker (cores) under which they count as waiting (remote reads, an
API): more of them help."""

# progress (diagnose/rules/progress.py)
HANG_FLOOR_S = 10.0
"""No progress for less than this is never a hang: a stack unchanged across ten dumps at one
a second, long enough that a slow step shows itself moving."""
HANG_K = 3
"""...nor for less than HANG_K times the job's own longest normal wait: its 99th-percentile step
by the agent's clock, or without the agent the longest pause its main thread showed in the stack
window. Three: a step's tail on a shared, busy machine stretches to about twice its p99
(docs/facts/bounds.md, "hung": many step times, taken against the tail so a job with a periodic
slow step is judged against that step); the confirmation in the hang rule (no CPU, no writes,
no stack moving) is what separates a hang from slowness, so the factor need only cover waits
that are as long as the job's own."""
STALL_NOTE_S = 5.0
"""Seconds of no progress from which the verdict says so before a hang is called: the previous
principal's evidence has gone (the CPU fell), and "no bound stands out" would hide why."""
IDLE_DUMPS = 0.7
"""Without CPU readings, the share of dumps py-spy must judge the thread idle in."""
IDLE_UTIL = 5.0
"""Mean GPU utilisation (%) under which, with no steps, nothing is training."""


def step_limit_s(p99_ms: float) -> float:
    """No step for longer than this is no progress by the agent's clock (the step pane colours
    an open phase by it too)."""
    return max(HANG_FLOOR_S, HANG_K * p99_ms / 1000)
