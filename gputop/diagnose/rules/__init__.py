"""One small rule per bound class of docs/facts/bounds.md, by the slice of the step-time
budget it speaks for. Each takes the reduced signals and returns a Finding: fired or not, with
the numbers and thresholds behind it, where they came from, and a confidence from how many
independent sources agree. Its entry in ``bounds.py`` places it in the registry and adds the
bound's levers when it fires; the verdict names the principal from the budget and reads the
rule of the largest loss for what limits it.

- ``progress``: is the job moving (hung, stalled, idle, warming up);
- ``host``: causes that stretch a slice (memory pressure, CPU oversubscription);
- ``gpu``: what limits compute (clocks cut by heat or power, DRAM) and gpu-compute itself;
- ``steps``: the loss slices (straggler, comms, data input, H2D, side work, the loop's own
  Python);
- ``common``: what they share (a finding, percentages, a threshold's band, stack shares).

Thresholds are the documented rules of thumb (docs/facts/), module constants that the
evidence text is formatted from: shown next to the numbers so a user can disagree.
"""

from gputop.diagnose.rules.common import HOLD, at, pct
from gputop.diagnose.rules.gpu import (
    gpu_compute,
    memory_bandwidth,
    throttled_power,
    throttled_thermal,
)
from gputop.diagnose.rules.host import (
    cpu_oversubscribed,
    host_memory_pressure,
    pools_crowd,
)
from gputop.diagnose.rules.progress import hung, idle, stalling, warming_up
from gputop.diagnose.rules.steps import (
    SPIKE_TIME,
    comms,
    data_input,
    h2d_copy,
    host_overhead,
    loop_share,
    own_functions,
    side_work,
    straggler,
)
from gputop.vocab.bounds import DATA_BOUNDS

__all__ = [
    "DATA_BOUNDS",
    "HOLD",
    "SPIKE_TIME",
    "at",
    "comms",
    "cpu_oversubscribed",
    "data_input",
    "gpu_compute",
    "h2d_copy",
    "host_memory_pressure",
    "host_overhead",
    "hung",
    "idle",
    "loop_share",
    "memory_bandwidth",
    "own_functions",
    "pct",
    "pools_crowd",
    "side_work",
    "stalling",
    "straggler",
    "throttled_power",
    "throttled_thermal",
    "warming_up",
]
