"""The bound classes' names: what the verdict calls a job's limit, in every output (the verdict
pane, diagnose's ``bound``, /metrics' ``gputop_verdict`` state set, the report).

Defined here, below every layer, so a rule, a pane and a test spell a bound one way; what each
bound means, its rule, levers and rank live in its registry entry (``gputop/diagnose/bounds.py``),
and the tests' ``registry_problems()`` (``tests/registry_check.py``) holds the two together (an
entry for every name, a name for every entry, and every name a rule emits or holds its band for).
"""

from __future__ import annotations

HUNG = "hung"
HOST_MEMORY_PRESSURE = "host-memory-pressure"
THROTTLED_THERMAL = "throttled-thermal"
THROTTLED_POWER = "throttled-power"
STRAGGLER = "straggler"
CPU_OVERSUBSCRIBED = "cpu-oversubscribed"
DATA_INPUT = "data-input"
DATA_CPU_TRANSFORM = "data-input/cpu-transform"
DATA_IO = "data-input/io"
COMMS = "comms"
H2D_COPY = "h2d-copy"
SIDE_WORK = "side-work"
HOST_OVERHEAD = "host-overhead"
MEMORY_BANDWIDTH = "memory-bandwidth"
GPU_COMPUTE = "gpu-compute"
IDLE = "idle"

DATA_BOUNDS = (DATA_INPUT, DATA_CPU_TRANSFORM, DATA_IO)
"""The data-input family: one slice (data wait), three causes."""
NAMES = (
    HUNG, HOST_MEMORY_PRESSURE, THROTTLED_THERMAL, THROTTLED_POWER, STRAGGLER,
    CPU_OVERSUBSCRIBED, *DATA_BOUNDS, COMMS, H2D_COPY, SIDE_WORK, HOST_OVERHEAD,
    MEMORY_BANDWIDTH, GPU_COMPUTE, IDLE,
)  # fmt: skip
"""Every bound, in the registry's (priority) order."""
