"""Every simulated board, read through `gputop snapshot --json`, equals the real board's capture.

The captures are real `nvidia-smi -q -x` outputs in ../shared/fixtures/nvidia-smi/ (not part of
this repository); the test skips when that folder is absent. H100 and L40S give temperature
thresholds relative to T.Limit (the margin to the max operating temperature), measured against a
rounded current temperature, so those compare to within 1 C.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import pynvml as N
import pytest
from tests_support import FIXTURES

from gputop.sim import SimBoard, installed

CAPTURES = FIXTURES / "nvidia-smi"
BOARDS = {"h100": "qx-h100.xml", "a100": "qx-a100.xml", "l40s": "qx-l40s.xml", "t4": "qx-t4.xml"}


def _num(text: str | None) -> float:
    assert text is not None
    return float(text.split()[0].rstrip("x"))


def _thresholds(gpu: ET.Element) -> dict[str, tuple[float, float]]:
    """name -> (expected value, tolerance) for the slowdown, shutdown and max-operating temps."""
    t = gpu.find("temperature")
    assert t is not None
    slow = t.findtext("gpu_temp_slow_threshold")
    if slow and slow.strip() not in ("N/A", ""):
        return {
            "temp_slowdown_c": (_num(slow), 0),
            "temp_shutdown_c": (_num(t.findtext("gpu_temp_max_threshold")), 0),
            "temp_gpu_max_c": (_num(t.findtext("gpu_temp_max_gpu_threshold")), 0),
        }
    limit = _num(t.findtext("gpu_temp")) + _num(t.findtext("gpu_temp_tlimit"))
    return {
        "temp_slowdown_c": (limit - _num(t.findtext("gpu_temp_slow_tlimit_threshold")), 1),
        "temp_shutdown_c": (limit - _num(t.findtext("gpu_temp_max_tlimit_threshold")), 1),
        "temp_gpu_max_c": (limit - _num(t.findtext("gpu_temp_max_gpu_tlimit_threshold")), 1),
    }


def _snapshot(board: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "snapshot", "--json", "--sim-board", board],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tempfile.gettempdir(),  # the installed package, not the checkout
    )
    return json.loads(out.stdout)


@pytest.mark.skipif(not CAPTURES.is_dir(), reason=f"no real captures at {CAPTURES}")
@pytest.mark.parametrize("key", sorted(BOARDS))
def test_simulated_board_equals_real_capture(key):
    root = ET.parse(CAPTURES / BOARDS[key]).getroot()
    gpus = root.findall("gpu")
    doc = _snapshot(f"{key}x{len(gpus)}")
    assert doc["schema_version"] == 1
    assert doc["source"]["kind"] == "simulated"
    assert len(doc["devices"]) == len(gpus)
    # each board runs its capture's driver when none is named
    assert doc["source"]["driver_version"] == root.findtext("driver_version")
    assert doc["source"]["cuda_version"] == root.findtext("cuda_version")
    for gpu, dev in zip(gpus, doc["devices"], strict=True):
        sample = dev["sample"]
        link = gpu.find("pci/pci_gpu_link_info")
        power = gpu.find("gpu_power_readings")
        mib = 1024 * 1024
        assert dev["name"] == gpu.findtext("product_name")
        assert dev["architecture"] == gpu.findtext("product_architecture")
        assert dev["pci_bus_id"] == gpu.findtext("pci/pci_bus_id")
        assert dev["pci_device_id"] == int(gpu.findtext("pci/pci_device_id"), 16)
        assert dev["max_sm_clock_mhz"] == _num(gpu.findtext("max_clocks/sm_clock"))
        assert dev["max_graphics_clock_mhz"] == _num(gpu.findtext("max_clocks/graphics_clock"))
        assert dev["max_mem_clock_mhz"] == _num(gpu.findtext("max_clocks/mem_clock"))
        assert dev["default_power_limit_w"] == _num(power.findtext("default_power_limit"))
        assert dev["min_power_limit_w"] == _num(power.findtext("min_power_limit"))
        assert dev["max_power_limit_w"] == _num(power.findtext("max_power_limit"))
        assert sample["power_limit_w"] == _num(power.findtext("current_power_limit"))
        assert dev["mem_total_bytes"] == _num(gpu.findtext("fb_memory_usage/total")) * mib
        assert sample["mem_reserved_bytes"] == _num(gpu.findtext("fb_memory_usage/reserved")) * mib
        assert dev["pcie_max_gen"] == _num(link.findtext("pcie_gen/max_link_gen"))
        assert dev["pcie_max_width"] == _num(link.findtext("link_widths/max_link_width"))
        assert sample["pcie_gen"] == _num(link.findtext("pcie_gen/current_link_gen"))
        assert sample["pcie_width"] == _num(link.findtext("link_widths/current_link_width"))
        for name, (value, tolerance) in _thresholds(gpu).items():
            assert abs(dev[name] - value) <= tolerance, (name, dev[name], value)
        # the captures are idle boards: the simulated idle board reads like them
        assert sample["reasons"] == ["gpu_idle"]
        assert sample["sm_clock_mhz"] == _num(gpu.findtext("clocks/sm_clock"))
        assert sample["graphics_clock_mhz"] == _num(gpu.findtext("clocks/graphics_clock"))
        assert sample["mem_clock_mhz"] == _num(gpu.findtext("clocks/mem_clock"))
        assert sample["util_gpu_pct"] == 0
        assert abs(sample["temp_c"] - _num(gpu.findtext("temperature/gpu_temp"))) <= 4
        instant = _num(power.findtext("instant_power_draw"))
        assert abs(sample["power_w"] - instant) <= 0.1 * instant


@pytest.mark.skipif(not CAPTURES.is_dir(), reason=f"no real captures at {CAPTURES}")
@pytest.mark.parametrize("key", sorted(BOARDS))
def test_idle_clocks_through_pynvml_equal_the_capture(key):
    """gputop reads no video clock, so every idle clock is read here the way nvidia-smi does."""
    gpu = ET.parse(CAPTURES / BOARDS[key]).getroot().find("gpu")
    assert gpu is not None
    kinds = {
        "graphics_clock": N.NVML_CLOCK_GRAPHICS,
        "sm_clock": N.NVML_CLOCK_SM,
        "mem_clock": N.NVML_CLOCK_MEM,
        "video_clock": N.NVML_CLOCK_VIDEO,
    }
    with installed(SimBoard(key, warmup_s=300)):
        N.nvmlInit()
        try:
            h = N.nvmlDeviceGetHandleByIndex(0)
            for name, kind in kinds.items():
                want = _num(gpu.findtext(f"clocks/{name}"))
                assert N.nvmlDeviceGetClockInfo(h, kind) == want, name
        finally:
            N.nvmlShutdown()
