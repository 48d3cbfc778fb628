"""The bound verdict: pure rules over windows of samples -> findings -> one principal bound.

This is the diagnosis's one door: code outside ``gputop.diagnose`` imports these names from
here and no submodule, so the package can move its insides without touching an output
(``tests/unit/test_import_hygiene.py`` holds it)."""

from gputop.diagnose.batch_means import STEPS_LEAST, Change, Mean, change_between, change_text
from gputop.diagnose.bounds import BY_NAME, NAMES, Style
from gputop.diagnose.budget import slices_of
from gputop.diagnose.budget_bins import BudgetBins, Interval
from gputop.diagnose.findings import Cause, Evidence, Finding, Saving, Verdict, saving_text
from gputop.diagnose.point import STACKS_WINDOW_S, EvalPoint, evaluate_at
from gputop.diagnose.run_compare import (
    Comparison,
    LeverCheck,
    Remembered,
    RememberedLever,
    SliceChange,
    compare,
    flat_settings,
)
from gputop.diagnose.run_steps import RunSteps, RunSummary
from gputop.diagnose.signals.inputs import RuleInputs, reduce_windows
from gputop.diagnose.signals.stacks import stack_signals
from gputop.diagnose.signals.steps import step_signals
from gputop.diagnose.step_shift import Shift, ShiftWatch
from gputop.diagnose.thresholds import (
    COMMS_SHARE,
    COMPUTE_CLOCK,
    CPU_THROTTLED,
    DATA_WAIT_WARN,
    FLOOR,
    IDLE_DUMPS,
    IDLE_UTIL,
    IO_PRESSURE,
    LAUNCH_UTIL,
    LOWERED_LIMIT,
    MEM_NEAR,
    MEM_PRESSURE,
    MEM_RISK,
    RUNNABLE_PER_CPU,
    RUNQ_PER_CPU,
    SIDE_SHARE,
    SLOWDOWN_MARGIN_C,
    STALL_NOTE_S,
    TINY_KERNELS,
    WORKER_PEGGED,
    step_limit_s,
)
from gputop.diagnose.verdict import State, evaluate

__all__ = [
    "BY_NAME",
    "COMMS_SHARE",
    "COMPUTE_CLOCK",
    "CPU_THROTTLED",
    "DATA_WAIT_WARN",
    "FLOOR",
    "IDLE_DUMPS",
    "IDLE_UTIL",
    "IO_PRESSURE",
    "LAUNCH_UTIL",
    "LOWERED_LIMIT",
    "MEM_NEAR",
    "MEM_PRESSURE",
    "MEM_RISK",
    "NAMES",
    "RUNNABLE_PER_CPU",
    "RUNQ_PER_CPU",
    "SIDE_SHARE",
    "SLOWDOWN_MARGIN_C",
    "STACKS_WINDOW_S",
    "STALL_NOTE_S",
    "STEPS_LEAST",
    "TINY_KERNELS",
    "WORKER_PEGGED",
    "BudgetBins",
    "Cause",
    "Change",
    "Comparison",
    "EvalPoint",
    "Evidence",
    "Finding",
    "Interval",
    "LeverCheck",
    "Mean",
    "Remembered",
    "RememberedLever",
    "RuleInputs",
    "RunSteps",
    "RunSummary",
    "Saving",
    "Shift",
    "ShiftWatch",
    "SliceChange",
    "State",
    "Style",
    "Verdict",
    "change_between",
    "change_text",
    "compare",
    "evaluate",
    "evaluate_at",
    "flat_settings",
    "reduce_windows",
    "saving_text",
    "slices_of",
    "stack_signals",
    "step_limit_s",
    "step_signals",
]
