"""The bound verdict: pure rules over windows of samples -> findings -> one principal bound."""

from gputop.diagnose.findings import Evidence, Finding, Verdict
from gputop.diagnose.verdict import State, evaluate, signals

__all__ = ["Evidence", "Finding", "State", "Verdict", "evaluate", "signals"]
