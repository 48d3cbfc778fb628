"""Every source's reduction together: what a rule and a bound's levers read (``RuleInputs``),
made from the windows in one call (``reduce_windows``). Each source is optional: a rule asks
for the signals it needs and records which were missing. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputop.diagnose.signals.gpu import GpuSignals, board_signals
from gputop.diagnose.signals.host import HostSignals, host_signals
from gputop.diagnose.signals.stacks import StackSignals, stack_signals
from gputop.diagnose.signals.steps import StepSignals, step_signals
from gputop.model import DeviceInfo, GpuSample, Window
from gputop.model.host import HostSample
from gputop.model.stacks import StacksSample
from gputop.model.steps import AgentsSample


@dataclass(frozen=True)
class RuleInputs:
    """Everything a rule and a bound's levers may read: one reduction per source (None: none)."""

    gpu: GpuSignals | None
    host: HostSignals | None
    steps: StepSignals | None
    stacks: StackSignals | None
    holding: str | None = None
    """The principal the verdict shows now (``verdict.State``), set by ``evaluate``: a rule
    keeps its own bound while the evidence stays above the lower end of its band (rules.HOLD)."""

    @property
    def gpu_view(self) -> bool:
        """Only NVML speaks: no target attached (the plain monitor, the demo's board)."""
        return self.steps is None and self.host is None and self.stacks is None


def reduce_windows(
    gpus: Sequence[Window[GpuSample]],
    devices: Sequence[DeviceInfo],
    host: Window[HostSample] | None = None,
    agents: AgentsSample | None = None,
    stacks: Window[StacksSample] | None = None,
) -> RuleInputs:
    """The windows of every source -> the rules' inputs (the MFU needs the GPUs' names)."""
    names = [d.name for d in devices if d.name]
    return RuleInputs(
        gpu=board_signals(gpus, devices),
        host=host_signals(host),
        steps=step_signals(agents, names),
        stacks=stack_signals(stacks),
    )
