"""The probe reads every NVML entry point the simulated board exports: a symbol the board fakes
and the check never reads would go unmeasured on the day a GPU is lent."""

from __future__ import annotations

import pynvml
import pytest
from nvml_phases import FakeClock, read_phase

from gputop.sim import SimBoard, installed


class Recording:
    """The fake library as pynvml sees it, noting each symbol pynvml looks up."""

    def __init__(self, lib) -> None:
        self._lib = lib
        self.seen: set[str] = set()

    def __getattr__(self, name: str):
        self.seen.add(name)
        return getattr(self._lib, name)


@pytest.mark.parametrize("spec", ["h100", "a100-mig"])
def test_the_probe_reads_every_symbol_the_board_exports(spec):
    clock = FakeClock()
    board = SimBoard(spec, scenario="compute", clock=clock)
    with installed(board):
        rec = Recording(pynvml.nvmlLib)
        pynvml.nvmlLib = rec
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml.nvmlInit()
        try:
            phase = read_phase(sleep=clock.advance, clock=clock, readings=2)
        finally:
            pynvml.nvmlShutdown()
    assert sorted(board.driver.symbols - rec.seen) == []
    calls = phase["readings"][-1]["calls"]
    assert calls["nvmlDeviceGetPowerUsage"]["value"] > 0
    assert calls["nvmlDeviceGetDriverModel:wrapper"] == {"error": "NVMLError_FunctionNotFound"}
    if spec.endswith("-mig"):
        assert calls["mig:nvmlDeviceIsMigDeviceHandle"] == {"value": 1}
        assert phase["readings"][-1]["gpm"]["error"] == "NVMLError_NotSupported"
    else:
        assert phase["readings"][-1]["gpm"]["sm_active_pct"] > 50
