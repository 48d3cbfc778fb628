"""Where a thread is, by its Python stack: the phases ``sources/stack_phases.py`` classifies a
py-spy stack into."""

from __future__ import annotations

STACKS_PERIOD_S = 1.0
"""How often a process's stacks are read: by its agent when it has one, else by py-spy (whose
CPU budget can make it slower: ``sources/stack_budget.py``)."""
STACK_DEPTH = 128
"""Frames kept per thread, innermost first, whoever read them (the agent or py-spy): deeper
recursion is cut, so a stack's size and the work on it stay bounded."""

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
LOGGING = "logging"
"""In a logging library: logging, TensorBoard's writer, wandb."""
EVAL_LOG = "evaluation / logging"
"""What LOGGING was called in recordings made before it had its own name."""
EVAL = "evaluation"
"""An evaluation pass: a function decorated with @torch.no_grad()/@torch.inference_mode(),
or one whose name says eval/valid/test (``sources/stack_phases.py``)."""
LOCK_WAIT = "lock wait"
BLOCKED = "blocked"
IDLE = "idle"
USER_CODE = "user code"
STACK_PHASES = (FETCH, WORKER_IDLE, PIN_MEMORY, COLLECTIVE_WAIT, HOST_SYNC, CHECKPOINT_SAVE,
                EVAL, DATA_WAIT, BACKWARD, OPTIMIZER, FORWARD, LOGGING, LOCK_WAIT, BLOCKED, IDLE,
                USER_CODE)  # fmt: skip
SIDE_PHASES = (CHECKPOINT_SAVE, EVAL, LOGGING, EVAL_LOG)
"""Work beside training: a main thread there is not training (side-work)."""
MODEL_PHASES = (FORWARD, BACKWARD, OPTIMIZER)
"""The model's own work (gpu-compute from stacks)."""
WAIT_LEAVES: tuple[tuple[str, str], ...] = (
    ("threading.py", "Condition.wait"),
    ("threading.py", "Event.wait"),
    ("queue.py", "Queue.get"),
    ("multiprocessing/queues.py", "Queue.get"),
    ("multiprocessing/connection.py", "*"),
    ("selectors.py", "*"),
    ("socket.py", "*"),
)
"""Innermost frames (file, function) of a thread blocked on something, when no training rule
matched (``sources/stack_phases.py``)."""
LOCK_LEAVES = (("threading.py", "Lock.acquire"), ("threading.py", "RLock.acquire"))
WAIT_FILES = frozenset(f for f, _ in (*WAIT_LEAVES, *LOCK_LEAVES))
"""Files a thread whose innermost frame is in waits there: the agent takes it for idle
without asking /proc (its phase is decided by the leaf, whatever its state)."""

AGENT_PACKAGE_PREFIX = "gputop_why_agent_"
"""The package name gputop's agent runs under in a job that was given a copy of it (the hash
of its code follows): its frames are gputop's, not the job's."""
