"""The agent's step phases: what a training step is split into, in pipeline order."""

from __future__ import annotations

DATA_WAIT = "data_wait"
H2D = "h2d"
FORWARD = "forward"
BACKWARD = "backward"
GRAD_SYNC = "grad_sync"
OPTIMIZER = "optimizer"
CHECKPOINT = "checkpoint"
EVAL_LOG = "eval_log"
OTHER = "other"
STEP_PHASES = (DATA_WAIT, H2D, FORWARD, BACKWARD, GRAD_SYNC, OPTIMIZER, CHECKPOINT, EVAL_LOG,
               OTHER)  # fmt: skip
"""In pipeline order: batch wait -> H2D -> forward -> backward -> grad sync -> optimizer -> side
work (checkpoint, eval/logging) -> anything else."""
UNMARKED = "unmarked"
"""A step's time outside every phase (not a phase the agent reports; derived)."""
COMPUTE_PHASES = (H2D, FORWARD, BACKWARD, OPTIMIZER)
"""The phases in which the GPU works (a simulated board follows their share)."""
MODEL_PHASES = (FORWARD, BACKWARD, OPTIMIZER)
"""The model's own work: a step that is mostly these is compute-bound."""
SIDE_PHASES = (CHECKPOINT, EVAL_LOG)
"""Work beside training that stalls it."""
