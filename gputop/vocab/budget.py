"""The step-time budget's slices: where a rank's wall time goes, in the order a step runs.

Every output names a slice with these words (the verdict pane's stacked line, diagnose, the
report, /metrics' ``slice`` label), so they are defined once, below every layer. Which bound
a slice is the loss of lives with the bound registry (``gputop/diagnose/bounds.py``,
``SLICE_BOUNDS``).
"""

from __future__ import annotations

JSON_DECIMALS = 3
"""Decimals every JSON output keeps of a number (``snapshot.jsonable``): a share said in whole
percents from a value read back says what it said from the value it was made of only when that
value had no more decimals than these (``diagnose.findings.Saving``)."""

COMPUTE = "compute"
"""Forward, backward and the optimizer: the model's own work (the only slice that is no loss)."""
DATA = "data"
"""Waiting for the next training batch."""
H2D = "h2d"
"""Host-to-device copies the step waits for."""
COMMS = "comms"
"""Exposed communication wait: gradient sync not hidden under compute, less the straggler part."""
STRAGGLER = "straggler"
"""The part of the communication wait spent waiting for a rank that works longer."""
EVAL = "eval"
"""Evaluation passes (their forwards, their batches, their metrics)."""
CHECKPOINT = "checkpoint"
"""Saving checkpoints."""
LOG = "log"
"""Logging and metrics in a logging library or under a log marker."""
GC = "gc"
"""Python's garbage collector (pauses whatever runs)."""
LOOP = "loop"
"""The loop's own Python outside every phase above: bookkeeping, per-step syncs, waits in
the job's own code."""
STALL = "stall"
"""No progress: the job stands still (every main thread parked, the tree quiet)."""

SLICES: tuple[str, ...] = (COMPUTE, DATA, H2D, COMMS, STRAGGLER, EVAL, CHECKPOINT, LOG, GC, LOOP,
                           STALL)  # fmt: skip
"""Every slice, in the order a step runs; a rank's shares over them add up to 1."""
LOSSES: tuple[str, ...] = SLICES[1:]
"""The slices that are time not spent computing: the verdict's principal is the largest."""
SIDE: tuple[str, ...] = (EVAL, CHECKPOINT, LOG, GC)
"""Work beside training (the side-work bound), each with levers of its own."""

NAMES: dict[str, str] = {
    COMPUTE: "compute",
    DATA: "data wait",
    H2D: "H2D copies",
    COMMS: "comms wait",
    STRAGGLER: "straggler wait",
    EVAL: "evaluation",
    CHECKPOINT: "checkpointing",
    LOG: "logging",
    GC: "garbage collection",
    LOOP: "the loop's own Python",
    STALL: "no progress",
}
"""What a sentence calls each slice ("data wait 40% of the step")."""
