"""Phase names: the agent's step phases (what a step is split into) and the phases a Python
stack is classified into (where a thread is, from py-spy)."""

from __future__ import annotations

STEP_PHASES = (
    "data_wait",
    "h2d",
    "forward",
    "backward",
    "grad_sync",
    "optimizer",
    "checkpoint",
    "eval_log",
    "other",
)
"""The agent's phases in pipeline order: batch wait -> H2D -> forward -> backward -> grad sync
-> optimizer -> side work (checkpoint, eval/logging) -> anything else."""
UNMARKED = "unmarked"
"""A step's time outside every phase (not a phase the agent reports; derived)."""
COMPUTE_PHASES = ("h2d", "forward", "backward", "optimizer")
"""The step phases in which the GPU works (a simulated board follows their share)."""

# where a thread is, by its Python stack (sources/stack_phases.py decides)
FETCH = "fetch/transform"
WORKER_IDLE = "worker idle"
PIN_MEMORY = "pin memory"
COLLECTIVE_WAIT = "collective wait"
HOST_SYNC = "host sync"
CHECKPOINT_SAVE = "checkpoint save"
DATA_WAIT = "data wait"
BACKWARD = "backward"
OPTIMIZER = "optimizer"
FORWARD = "forward"
EVAL_LOG = "evaluation / logging"
LOCK_WAIT = "lock wait"
BLOCKED = "blocked"
IDLE = "idle"
USER_CODE = "user code"
STACK_PHASES = (FETCH, WORKER_IDLE, PIN_MEMORY, COLLECTIVE_WAIT, HOST_SYNC, CHECKPOINT_SAVE,
                DATA_WAIT, BACKWARD, OPTIMIZER, FORWARD, EVAL_LOG, LOCK_WAIT, BLOCKED, IDLE,
                USER_CODE)  # fmt: skip
PARKED_PHASES = frozenset({COLLECTIVE_WAIT, LOCK_WAIT, BLOCKED, HOST_SYNC, DATA_WAIT})
"""Stack phases of a thread that waits: the same stack there for long is hang evidence."""
