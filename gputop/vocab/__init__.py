"""Names several layers share, below all of them: the agent's step phases, the phases a Python
stack is classified into, the step-time budget's slices, the bound classes' names, and NVML's
clock-event reasons. Standard library only (the agent, which runs inside the trainer, imports
it). What a bound means lives with its registry in ``gputop/diagnose/bounds.py``."""
