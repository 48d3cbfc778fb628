"""The bound verdict: pure rules over windows of samples -> findings -> one principal bound."""

from gputop.diagnose.findings import Evidence, Finding, Verdict
from gputop.diagnose.signals.inputs import RuleInputs, reduce_windows
from gputop.diagnose.verdict import State, evaluate

__all__ = ["Evidence", "Finding", "RuleInputs", "State", "Verdict", "evaluate", "reduce_windows"]
