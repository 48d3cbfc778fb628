"""The agent's step phases: what a training step is split into, in pipeline order."""

from __future__ import annotations

DATA_WAIT = "data_wait"
H2D = "h2d"
FORWARD = "forward"
BACKWARD = "backward"
GRAD_SYNC = "grad_sync"
OPTIMIZER = "optimizer"
CHECKPOINT = "checkpoint"
EVAL = "eval"
"""An evaluation pass: forwards under no_grad / inference_mode or of a model in eval mode, and
the batches it waits for (a validation loader's wait is the eval's cost, not training's)."""
LOG = "log"
"""Logging and metrics (a user's ``gt.LOG`` marker)."""
EVAL_LOG = "eval_log"
"""Before eval and log were apart: older agents, recordings and scripts' ``gt.EVAL_LOG``
markers. Its time was almost always an eval pass (the automatic hooks found no logging), so
the step-time budget counts it as evaluation."""
OTHER = "other"
STEP_PHASES = (DATA_WAIT, H2D, FORWARD, BACKWARD, GRAD_SYNC, OPTIMIZER, CHECKPOINT, EVAL, LOG,
               EVAL_LOG, OTHER)  # fmt: skip
"""In pipeline order: batch wait -> H2D -> forward -> backward -> grad sync -> optimizer -> side
work (checkpoint, eval, logging) -> anything else. Phases travel by name on the wire, so a
phase added here reads as a custom name in an older monitor."""
UNMARKED = "unmarked"
"""A step's time outside every phase (not a phase the agent reports; derived)."""
COMPUTE_PHASES = (H2D, FORWARD, BACKWARD, OPTIMIZER)
"""The phases in which the GPU works (a simulated board follows their share)."""
MODEL_PHASES = (FORWARD, BACKWARD, OPTIMIZER)
"""The model's own work: a step that is mostly these is compute-bound."""
SIDE_PHASES = (CHECKPOINT, EVAL, LOG, EVAL_LOG)
"""Work beside training that stalls it."""
