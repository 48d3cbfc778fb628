"""Names several layers share, below all of them: the agent's step phases, the phases a Python
stack is classified into, and NVML's clock-event reasons. Standard library only (the agent,
which runs inside the trainer, imports it). Bound names live with their registry in
``gputop/diagnose/`` (every layer that names a bound is above it)."""
