"""Real NVML clients over every simulated board and driver generation (issue 16).

nvitop 1.7.2 (its API, ``Device(uuid=)``, ``Device(bus_id=)``, processes, and ``nvitop -1``) and
gpustat 1.1.1 (``new_query()`` and ``--json``) run in a forked child over the board
(tests/sim_clients.py). Each must run with no error and no FunctionNotFound, show N/A only where
the real captures have none either, and agree with the board's facts and with gputop's own
snapshot of the same board.
"""

from __future__ import annotations

import pytest
from sim_clients import ClientRun, run_forked

from gputop.sim import DRIVERS, SimBoard, SimConfigError, parse_board
from gputop.sim.drivers import branch
from gputop.sim.fakelib import V1_COUNTS_RESERVED_FROM

BOARDS = ("h100x8", "a100", "l40s", "t4", "h100-mig", "a100-mig")
MIB = 1024 * 1024

NA_ON_EVERY_BOARD = {"fan_speed", "current_driver_model"}
"""N/A in every capture: passive cooling (no fan), and a Windows-only driver model."""
MIG_ROW = {
    "name",
    "uuid",
    "memory_total",
    "memory_used",
    "memory_free",
    "bar1_memory_total",
    "bar1_memory_used",
    "bar1_memory_free",
    "gpu_instance_id",
    "compute_instance_id",
}
"""What nvitop shows for a MIG device; the rest are physical facts, asked of the parent (no
capture has MIG turned on)."""


def _allowed_na(board: str, driver: str) -> set[str]:
    spec = parse_board(board)
    allowed = set(NA_ON_EVERY_BOARD)
    if branch(DRIVERS[driver]) >= 580:
        allowed.add("display_mode")  # the 580 and 595 captures: "deprecated"
    if not spec.profile.mig_capable:
        allowed.add("mig_mode")  # L40S, T4 captures: mig_mode N/A
    if spec.mig:  # utilisation is not reported for a MIG-enabled GPU (nvml.h)
        allowed |= {"gpu_utilization", "memory_utilization"}
    return allowed


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, str], ClientRun]:
    """Each board and driver run once for the whole module (about half a second each)."""
    return {}


def _run(runs: dict, board: str, driver: str) -> ClientRun:
    try:
        SimBoard(board, driver=driver)
    except SimConfigError as e:  # a combination that never existed is refused
        pytest.skip(str(e))
    if (board, driver) not in runs:
        runs[board, driver] = run_forked(board, driver)
    return runs[board, driver]


CASES = [(b, d) for b in BOARDS for d in DRIVERS]


def _total(p, driver: str) -> int:
    """Memory total as that driver reports it: before R510 (memory v1 only) the driver's
    reservation is left out of the total (gputop/sim/fakelib.V1_COUNTS_RESERVED_FROM)."""
    if branch(DRIVERS[driver]) < V1_COUNTS_RESERVED_FROM:
        return p.mem_total - p.mem_reserved
    return p.mem_total


@pytest.mark.parametrize(("board", "driver"), CASES)
def test_clients_run_clean(runs, board, driver):
    run = _run(runs, board, driver)
    assert run.errors == []
    assert run.unknown_functions == []
    assert run.after_shutdown == "NVMLError_Uninitialized"


@pytest.mark.parametrize(("board", "driver"), CASES)
def test_nvitop_shows_what_the_capture_has(runs, board, driver):
    run = _run(runs, board, driver)
    spec = parse_board(board)
    p = spec.profile
    allowed = _allowed_na(board, driver)
    physical = [d for d in run.nvitop if not d["is_mig_device"]]
    assert len(physical) == spec.count
    for i, d in enumerate(physical):
        na = {k for k, v in d.items() if v == "N/A"}
        assert na <= allowed, (i, na - allowed)
        assert d["name"] == p.name
        assert d["memory_total"] == _total(p, driver)
        assert d["power_limit"] == p.power_limit * 1000
        assert (d["max_sm_clock"], d["max_memory_clock"]) == (p.max_sm_clock, p.max_mem_clock)
        assert d["max_video_clock"] == p.max_video_clock
        assert (d["curr_pcie_link_generation"], d["curr_pcie_link_width"]) == (
            p.pcie_cur_gen,
            p.pcie_cur_width,
        )
        assert (d["max_pcie_link_generation"], d["max_pcie_link_width"]) == (
            p.pcie_max_gen,
            p.pcie_max_width,
        )
        assert d["serial"] == str(p.serial_base + i)
        assert d["bar1_memory_total"] == p.bar1_total_mib * MIB
        assert d["cuda_compute_capability"] == list(p.cuda_capability)
        assert d["persistence_mode"] == "Enabled"
        assert (d["performance_state"], d["compute_mode"]) == ("P0", "Default")
        assert d["total_volatile_uncorrected_ecc_errors"] == 0
        assert run.nvitop_lookup[f"uuid:{i}"] == i
        assert run.nvitop_lookup[f"bus_id:{i}"] == i
    migs = [d for d in run.nvitop if d["is_mig_device"]]
    assert len(migs) == (len(p.mig_profiles) * spec.count if spec.mig else 0)
    for d in migs:
        assert not {k for k in MIG_ROW if d[k] == "N/A"}, d


@pytest.mark.parametrize(("board", "driver"), CASES)
def test_nvitop_once_prints_every_device(runs, board, driver):
    run = _run(runs, board, driver)
    spec = parse_board(board)
    out = run.nvitop_once
    assert f"Driver Version: {DRIVERS[driver].version}" in out
    assert out.count(spec.profile.name.removeprefix("NVIDIA ")[:19]) >= spec.count
    # one N/A per GPU (its fan) and, MIG-enabled, its GPU-Util: nothing else is missing
    per_gpu = 2 if spec.mig else 1
    assert out.count("N/A") == per_gpu * spec.count, out


@pytest.mark.parametrize(("board", "driver"), CASES)
def test_gpustat_agrees_with_the_board(runs, board, driver):
    run = _run(runs, board, driver)
    spec = parse_board(board)
    p = spec.profile
    for doc in (run.gpustat, run.gpustat_json):
        assert doc["driver_version"] == DRIVERS[driver].version
        assert len(doc["gpus"]) == spec.count
        for i, g in enumerate(doc["gpus"]):
            missing = {k for k, v in g.items() if v is None}
            allowed = {"fan.speed"} | ({"utilization.gpu"} if spec.mig else set())
            assert missing <= allowed, missing
            assert (g["index"], g["name"]) == (i, p.name)
            assert g["memory.total"] == _total(p, driver) // MIB
            assert g["enforced.power.limit"] == p.power_limit
            assert g["utilization.enc"] == g["utilization.dec"] == 0
    assert [p["pid"] for p in run.gpustat_json["gpus"][0]["processes"]] == [
        x["pid"] for x in run.nvitop_processes
    ]


@pytest.mark.parametrize(("board", "driver"), CASES)
def test_clients_equal_gputop_snapshot(runs, board, driver):
    """The same facts through nvitop, gpustat and gputop's snapshot document."""
    run = _run(runs, board, driver)
    assert run.gputop["source"]["driver_version"] == run.gpustat_json["driver_version"]
    physical = [d for d in run.nvitop if not d["is_mig_device"]]
    for mine, nv, gs in zip(run.gputop["devices"], physical, run.gpustat_json["gpus"], strict=True):
        assert mine["name"] == nv["name"] == gs["name"]
        assert mine["uuid"] == nv["uuid"] == gs["uuid"]
        assert mine["pci_bus_id"] == nv["bus_id"]
        assert mine["mem_total_bytes"] == nv["memory_total"] == gs["memory.total"] * MIB
        assert mine["sample"]["power_limit_w"] * 1000 == nv["power_limit"]
        assert mine["sample"]["power_limit_w"] == gs["enforced.power.limit"]
        assert mine["max_sm_clock_mhz"] == nv["max_sm_clock"]
        assert mine["max_mem_clock_mhz"] == nv["max_memory_clock"]
        assert mine["pcie_max_gen"] == nv["max_pcie_link_generation"]
        assert mine["pcie_max_width"] == nv["max_pcie_link_width"]
        assert mine["sample"]["pcie_gen"] == nv["curr_pcie_link_generation"]
        assert mine["sample"]["pcie_width"] == nv["curr_pcie_link_width"]


@pytest.mark.parametrize("board", ["t4", "h100x8"])
def test_busy_process_shows_the_boards_activity(board):
    """On a compute-bound board, nvitop's %SM for the board's process is the GPU's utilisation
    (the process samples carry epoch timestamps, so "since one second ago" finds them)."""
    run = run_forked(board, "r580", "compute")
    assert run.errors == []
    (proc,) = run.nvitop_processes
    util = run.nvitop[0]["gpu_utilization"]
    assert util >= 95
    assert abs(proc["gpu_sm_utilization"] - util) <= 3
