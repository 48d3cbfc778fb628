"""The NVML source through the real pynvml bindings over the simulated board.

Every field, every driver generation, and injected NotSupported / NoPermission / GpuIsLost /
hangs: affected fields read None with a reason, the rest stay correct, nothing raises.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pynvml as N
import pytest
from tests_support import until

from gputop.sim import BOARDS, DRIVERS, Fault, SimProcess, uninstall
from gputop.sim.activity import Activity, constant
from gputop.sim.boards import A100, H100, MIB, T4
from gputop.sim.drivers import branch, supported_drivers
from gputop.sim.scenarios import Scenario
from gputop.sources.nvml import GPM_METRICS, SLOW_TIER_S, NvmlSource
from gputop.sources.nvml_errors import NvmlUnavailable
from gputop.sources.pidns import NOT_VISIBLE
from gputop.sources.watchdog import SourceStalled, Watchdog

DYNAMIC_FIELDS = (
    "sm_clock_mhz",
    "graphics_clock_mhz",
    "mem_clock_mhz",
    "power_w",
    "power_limit_w",
    "energy_j",
    "temp_c",
    "util_gpu_pct",
    "util_mem_pct",
    "mem_used_bytes",
    "mem_free_bytes",
    "reasons_mask",
    "pcie_tx_kbps",
    "pcie_rx_kbps",
    "pcie_gen",
    "pcie_width",
)
BUSY = Activity(duty=1.0, sm=0.8, occupancy=0.5, tensor=0.6, dram=0.4, pcie_rx=0.1, nvlink=0.2)


def busy_scenario(**kw) -> Scenario:
    return Scenario("busy", "test load", constant(BUSY), **kw)


def test_static_facts_match_the_board_profile(sim):
    s = sim("h100x8")
    src = s.open()
    assert len(src.devices) == 8
    for i, d in enumerate(src.devices):
        assert d.index == i
        assert d.name == "NVIDIA H100 80GB HBM3"
        assert d.uuid.startswith("GPU-") and len(d.uuid) == 40
        assert d.pci_bus_id == H100.pci_bus_ids[i]
        assert d.pci_device_id == 0x233010DE
        assert d.architecture == "Hopper"
        assert (d.max_sm_clock_mhz, d.max_mem_clock_mhz) == (1980, 2619)
        assert (d.default_power_limit_w, d.min_power_limit_w, d.max_power_limit_w) == (
            700.0,
            200.0,
            700.0,
        )
        assert d.mem_total_bytes == 81559 * MIB
        assert (d.temp_slowdown_c, d.temp_shutdown_c, d.temp_gpu_max_c) == (89, 95, 87)
        assert (d.pcie_max_gen, d.pcie_max_width) == (5, 16)
        assert d.nvlink_links == 18
        assert d.gpm_supported is True
        assert d.mig_enabled is False
        assert dict(d.na) == {}
    assert len({d.uuid for d in src.devices}) == 8


GPM_FIELDS = frozenset(GPM_METRICS)
MISSING_BY_DRIVER = {
    "r470": GPM_FIELDS | {"mem_reserved_bytes"},
    "r515": GPM_FIELDS,
    "r535": frozenset(),
    "r570": frozenset(),
    "r580": frozenset(),
    "r595": frozenset(),
}


def hopper_or_ampere(driver: str) -> str:
    """H100 where the driver runs Hopper; A100 on the older drivers (H100 there is refused)."""
    return "h100" if DRIVERS[driver] in supported_drivers(H100.architecture) else "a100"


def events_symbol(driver: str) -> bool:
    """Clock *event* reasons exist from R535 (the older name stays)."""
    return branch(DRIVERS[driver]) >= 535


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_every_field_is_read_or_explained_on_each_driver(sim, driver):
    board = BOARDS[hopper_or_ampere(driver)]
    s = sim(f"{board.key}x2", driver=driver, scenario=busy_scenario())
    s.board.devices[0].processes.append(SimProcess(os.getpid(), 2 << 30))
    src = s.open()
    s.tick(10.0)
    g0, _ = s.tick(SLOW_TIER_S)  # NVLink's rate needs two reads of the slow tier
    missing = MISSING_BY_DRIVER[driver]
    assert set(g0.na) == missing
    version = DRIVERS[driver].version
    assert all(g0.na[f] == f"not in this driver ({version})" for f in missing)
    for f in (*DYNAMIC_FIELDS, "mem_reserved_bytes", "nvlink_tx_kibps", *GPM_FIELDS):
        assert (getattr(g0, f) is None) == (f in missing), f
    assert g0.sm_clock_mhz == board.max_sm_clock and g0.temp_c > board.idle_temp
    assert g0.processes[0].sm_util_pct >= 98
    d = src.devices[0]
    assert set(d.na) == ({"gpm"} if missing >= GPM_FIELDS else set())
    assert d.max_sm_clock_mhz == board.max_sm_clock
    assert d.temp_slowdown_c == board.temp_slowdown


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_injected_faults_on_each_driver_leave_the_rest_correct(sim, driver):
    s = sim(f"{hopper_or_ampere(driver)}x3", driver=driver, scenario="compute")
    reasons_symbol = (
        "nvmlDeviceGetCurrentClocksEventReasons"
        if events_symbol(driver)
        else "nvmlDeviceGetCurrentClocksThrottleReasons"
    )
    s.board.faults += [
        Fault(code=N.NVML_ERROR_NOT_SUPPORTED, symbol="nvmlDeviceGetPowerUsage", device=0),
        Fault(code=N.NVML_ERROR_NO_PERMISSION, symbol=reasons_symbol, device=0),
        Fault(code=N.NVML_ERROR_GPU_IS_LOST, device=1, start=5.0),
    ]
    s.open()
    s.tick(1.0)
    g0, g1, g2 = s.tick(10.0)
    assert g0.power_w is None and g0.na["power_w"] == "not supported on this GPU"
    assert g0.reasons_mask is None and g0.na["reasons_mask"].startswith("no permission")
    assert g1.lost and all(getattr(g1, f) is None for f in DYNAMIC_FIELDS)
    assert g2.power_w is not None and g2.reasons_mask is not None and not g2.lost
    for f in DYNAMIC_FIELDS:
        if f not in ("power_w", "reasons_mask"):
            assert getattr(g0, f) == pytest.approx(getattr(g2, f), rel=0.2), f


def test_every_dynamic_field_under_load_on_the_current_driver(sim):
    s = sim("h100x2", scenario=busy_scenario())
    s.board.devices[0].processes.append(SimProcess(os.getpid(), 12 << 30, sm_share=1.0))
    src = s.open()
    first = s.tick(10.0)  # long enough for the 1 s power average to settle
    later = s.tick(SLOW_TIER_S)  # and NVLink's rate: two reads of the slow tier
    g0, g1 = later
    assert g0.t == s.clock.now and g0.index == 0 and g1.index == 1
    assert dict(g0.na) == {}, g0.na
    for f in DYNAMIC_FIELDS:
        assert getattr(g0, f) is not None, f
    assert g0.sm_clock_mhz == 1980 and g0.reasons == ()
    assert H100.idle_power < g0.power_w <= 700
    assert g0.power_limit_w == 700.0
    assert g0.energy_j > first[0].energy_j
    assert g0.energy_j - first[0].energy_j == pytest.approx(g0.power_w * SLOW_TIER_S, rel=0.05)
    assert g0.util_gpu_pct >= 98
    assert g0.mem_used_bytes == 12 << 30
    assert g0.mem_reserved_bytes == H100.mem_reserved
    assert g0.mem_free_bytes == H100.mem_total - H100.mem_reserved - (12 << 30)
    assert (g0.pcie_gen, g0.pcie_width) == (5, 16)
    assert g0.pcie_rx_kbps > 50 * g0.pcie_tx_kbps  # H2D traffic shows as RX
    # GPM over the last second matches what the GPU did
    assert g0.sm_active_pct == pytest.approx(80.0, abs=0.5)
    assert g0.sm_occupancy_pct == pytest.approx(50.0, abs=0.5)
    assert g0.tensor_active_pct == pytest.approx(60.0, abs=0.5)
    assert g0.dram_bw_pct == pytest.approx(40.0, abs=0.5)
    assert g0.gpm_pcie_rx_mibps > 1000
    expected_nvlink_kibps = 0.2 * 18 * 25e9 / 1024
    assert g0.nvlink_tx_kibps == pytest.approx(expected_nvlink_kibps, rel=0.01)
    assert g0.nvlink_rx_kibps == pytest.approx(expected_nvlink_kibps, rel=0.01)
    assert g0.gpm_nvlink_tx_mibps == pytest.approx(expected_nvlink_kibps / 1024, rel=0.01)
    (p,) = g0.processes
    assert (p.pid, p.local_pid, p.container_pid, p.note) == (os.getpid(), os.getpid(), None, None)
    assert p.used_mem_bytes == 12 << 30
    assert p.sm_util_pct >= 98 and p.mem_util_pct > 0
    assert g1.processes == ()
    assert src.capabilities.gpm and src.capabilities.clock_event_reasons


def test_first_tick_explains_what_needs_two_samples(sim):
    s = sim("h100", scenario=busy_scenario())
    s.open()
    (g,) = s.tick(1.0)
    for name in GPM_METRICS:
        assert getattr(g, name) is None
        assert "two samples" in g.na[name]
    assert g.nvlink_tx_kibps is None and "two samples" in g.na["nvlink_tx_kibps"]


def test_gpm_is_not_resampled_faster_than_its_refresh(sim):
    s = sim("h100", scenario=busy_scenario())
    s.open()
    s.tick(1.0)
    (a,) = s.tick(1.0)
    (b,) = s.tick(0.05)  # under 100 ms: the previous metrics are kept, not a bogus value
    assert b.sm_active_pct == a.sm_active_pct
    assert "sm_active_pct" not in b.na


@pytest.mark.parametrize(
    ("board", "driver"),
    [(b.key, d.key) for b in BOARDS.values() for d in supported_drivers(b.architecture)],
)
def test_each_driver_generation_degrades_field_by_field(sim, board, driver):
    s = sim(board, driver=driver, scenario="compute")
    src = s.open()
    s.tick(1.0)
    (g,) = s.tick(1.0)
    caps = src.capabilities
    version = DRIVERS[driver].version
    # always there, through whichever symbol the driver has
    for f in ("sm_clock_mhz", "power_w", "temp_c", "util_gpu_pct", "mem_used_bytes"):
        assert getattr(g, f) is not None, (f, g.na)
    assert g.reasons_mask is not None and g.reasons == ()
    assert caps.clock_event_reasons == events_symbol(driver)
    assert caps.temperature_v == (branch(DRIVERS[driver]) >= 565)
    if driver == "r470":
        assert g.mem_reserved_bytes is None
        assert g.na["mem_reserved_bytes"] == f"not in this driver ({version})"
        assert not caps.processes_v3 and caps.processes_v2
    else:
        assert g.mem_reserved_bytes is not None
    has_gpm = board == "h100"  # every driver that runs an H100 has GPM
    assert src.devices[0].gpm_supported == has_gpm
    if has_gpm:
        assert g.sm_active_pct is not None
    else:
        assert g.sm_active_pct is None
        expected = "needs a Hopper" if branch(DRIVERS[driver]) >= 520 else "not in this driver"
        assert expected in g.na["sm_active_pct"]
    if board in ("l40s", "t4"):
        assert g.nvlink_tx_kibps is None and g.na["nvlink_tx_kibps"] == "no NVLink on this GPU"


def test_throttle_reasons_fallback_decodes_the_same_bits(sim):
    s = sim("a100", driver="r470", scenario="power-throttled")
    src = s.open()
    (g,) = s.tick(30.0)
    assert not src.capabilities.clock_event_reasons
    assert "sw_power_cap" in g.reasons


def test_lowered_power_limit_under_full_load_sets_sw_power_cap(sim):
    s = sim("h100", scenario="compute")
    s.board.set_power_limit(0, 400.0)
    s.open()
    s.tick(10.0)
    (g,) = s.tick(1.0)
    assert g.power_limit_w == 400.0
    assert "sw_power_cap" in g.reasons
    assert g.sm_clock_mhz < 1980
    assert g.power_w <= 400.0 * 1.02


def test_idle_board_reports_gpu_idle(sim):
    s = sim("a100")
    s.open()
    (g,) = s.tick(5.0)
    assert g.reasons == ("gpu_idle",)
    assert g.sm_clock_mhz == A100.idle_sm_clock
    assert g.util_gpu_pct == 0


def test_not_supported_on_one_field_of_one_device(sim):
    s = sim("h100x2", scenario="compute")
    s.board.faults.append(
        Fault(code=N.NVML_ERROR_NOT_SUPPORTED, symbol="nvmlDeviceGetPowerUsage", device=1)
    )
    s.open()
    s.tick()
    g0, g1 = s.tick(SLOW_TIER_S)  # NVLink's rate needs two reads of the slow tier
    assert g1.power_w is None and g1.na == {"power_w": "not supported on this GPU"}
    assert g0.power_w is not None and "power_w" not in g0.na
    for f in DYNAMIC_FIELDS:
        if f != "power_w":
            assert getattr(g1, f) is not None, f


def test_no_permission_on_static_and_dynamic_fields(sim):
    s = sim("t4")
    s.board.faults += [
        Fault(code=N.NVML_ERROR_NO_PERMISSION, symbol="nvmlDeviceGetTemperatureThreshold"),
        Fault(code=N.NVML_ERROR_NO_PERMISSION, symbol="nvmlDeviceGetTotalEnergyConsumption"),
    ]
    src = s.open()
    (d,) = src.devices
    for f in ("temp_shutdown_c", "temp_slowdown_c", "temp_gpu_max_c", "temp_mem_max_c"):
        assert getattr(d, f) is None
        assert d.na[f].startswith("no permission")
    assert d.max_sm_clock_mhz == T4.max_sm_clock
    (g,) = s.tick()
    assert g.energy_j is None and g.na["energy_j"].startswith("no permission")
    assert g.temp_c is not None


def test_gpu_lost_retires_one_device_and_keeps_the_others(sim):
    s = sim("h100x4", scenario="compute")
    s.open()
    s.tick()
    s.board.faults.append(Fault(code=N.NVML_ERROR_GPU_IS_LOST, device=2, start=s.board.elapsed))
    samples = s.tick()
    assert [g.lost is not None for g in samples] == [False, False, True, False]
    lost = samples[2]
    assert "fell off the bus" in lost.lost
    assert all(getattr(lost, f) is None for f in DYNAMIC_FIELDS)
    calls = s.board.calls
    again = s.tick()
    assert again[2].lost and again[0].sm_clock_mhz == 1980
    per_device_calls = (s.board.calls - calls) / 3
    assert per_device_calls > 10  # the lost device is no longer queried; others are


def test_gpu_lost_at_start_is_reported_not_raised(sim):
    s = sim("a100x2")
    s.board.faults.append(Fault(code=N.NVML_ERROR_GPU_IS_LOST, device=0))
    src = s.open()
    assert src.devices[0].name is None and "fell off the bus" in src.devices[0].na["name"]
    assert src.devices[1].name == A100.name
    g0, g1 = s.tick()
    assert g0.lost and not g1.lost


def test_idle_process_reads_zero_utilisation_not_missing(sim):
    s = sim("l40s")
    s.board.devices[0].processes.append(SimProcess(os.getpid(), 1 << 30))
    s.open()
    (g,) = s.tick()
    (p,) = g.processes
    assert (p.sm_util_pct, p.mem_util_pct) == (0, 0)  # NVML said NotFound: idle
    assert "process_util" not in g.na


def test_host_pid_not_visible_here_is_explained(sim):
    s = sim("h100", scenario="compute")
    s.board.devices[0].processes.append(SimProcess(4_000_000, 1 << 30))  # > pid_max: not here
    s.open()
    (g,) = s.tick()
    (p,) = g.processes
    assert p.pid == 4_000_000 and p.local_pid is None and p.note == NOT_VISIBLE


def test_mig_instances_are_listed_with_their_parent(sim):
    s = sim("a100-mig", scenario="compute")
    s.board.devices[0].processes.append(SimProcess(os.getpid(), 3 << 30, mig_index=1))
    src = s.open()
    (d,) = src.devices
    assert d.mig_enabled is True
    assert [m.mig_index for m in d.mig] == [0, 1]
    assert all(m.parent_index == 0 for m in d.mig)
    assert d.mig[0].name.endswith("MIG 3g.20gb") and d.mig[0].uuid.startswith("MIG-")
    assert [m.gpu_instance_id for m in d.mig] == [1, 2]
    assert d.mig[1].mem_total_bytes == 19968 * MIB
    (g,) = s.tick()
    assert g.util_gpu_pct is None and g.na["util_gpu_pct"] == "not supported on this GPU"
    assert [len(m.processes) for m in g.mig] == [0, 1]
    assert g.mig[1].mem_used_bytes == 3 << 30
    assert g.mig[1].processes[0].gpu_instance_id == 2


def test_no_mig_on_boards_without_it(sim):
    s = sim("t4")
    (d,) = s.open().devices
    assert d.mig_enabled is None and d.na["mig_enabled"] == "not supported on this GPU"


def test_wedged_driver_call_times_out_and_recovers(sim):
    s = sim("h100x2")
    src = s.open()
    s.board.faults.append(Fault(hang=True, symbol="nvmlDeviceGetPowerUsage", device=1))
    wd = Watchdog("NVML", timeout=0.3)
    with pytest.raises(SourceStalled):
        wd.call(src.sample)
    s.board.faults.clear()
    s.board.release_hangs()
    until(lambda: not wd.stalled, timeout=20, what="the released call to return", every=0.01)
    assert len(wd.call(src.sample)) == 2


def test_same_seed_same_clock_same_readings(sim):
    runs = []
    for _ in range(2):
        s = sim("h100x2", scenario="starved", seed=3)
        s.open()
        runs.append([s.tick(0.37) for _ in range(20)])
        s.source.close()
        s.source = None
    strip = lambda samples: [(g.sm_clock_mhz, g.power_w, g.util_gpu_pct, g.temp_c) for g in samples]  # noqa: E731
    assert [strip(x) for x in runs[0]] == [strip(x) for x in runs[1]]
    utils = [g.util_gpu_pct for tick in runs[0] for g in tick]
    # a 0.3 s burst every 1.2 s, seen through NVML's 1 s duty cycle: low and uneven
    assert max(utils) - min(utils) >= 15 and sum(utils) / len(utils) < 50


def test_no_driver_gives_one_clear_message():
    uninstall()  # nothing below pynvml: the real library load fails on this machine
    with pytest.raises(NvmlUnavailable) as e:
        NvmlSource.open()
    msg = str(e.value)
    assert "no NVIDIA driver found" in msg and "--sim-board h100" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (N.NVML_ERROR_DRIVER_NOT_LOADED, "kernel driver is not loaded"),
        (N.NVML_ERROR_NO_PERMISSION, "no permission"),
        (N.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "reboot"),
    ],
)
def test_init_failures_say_what_to_do(sim, code, words):
    s = sim("t4")
    s.board.faults.append(Fault(code=code, symbol="nvmlInitWithFlags"))
    with pytest.raises(NvmlUnavailable, match=words):
        s.open()


def test_slow_tier_reads_processes_once_a_slow_tier(sim):
    s = sim("h100", scenario="compute")
    s.open()
    s.tick(1.0)
    s.board.devices[0].processes.append(SimProcess(os.getpid(), 1 << 30))
    (g,) = s.tick(SLOW_TIER_S / 2)
    assert g.processes == ()  # read half a tier ago: the last list stands
    (g,) = s.tick(SLOW_TIER_S / 2)
    assert [p.pid for p in g.processes] == [os.getpid()]


def test_slow_tier_keeps_its_reasons_between_reads(sim):
    s = sim("t4", scenario="compute")
    s.open()
    for _ in range(3):
        (g,) = s.tick(0.25)
        assert g.na["nvlink_tx_kibps"] == "no NVLink on this GPU"


def test_only_the_chosen_gpus_are_read_and_shown(sim):
    from gputop.sources.gpu_choice import NoSuchGpu, parse_only

    s = sim("h100x8", scenario="compute")
    uuid = s.board.devices[5].uuid
    src = s.open(only=parse_only(f"2,{uuid[:12]}"))
    assert [d.index for d in src.devices] == [2, 5]
    s.tick()
    assert [g.index for g in s.tick()] == [2, 5]  # the others are not read at all
    src.close()
    s.source = None
    with pytest.raises(NoSuchGpu, match="no GPU 8 on this machine"):
        s.open(only=parse_only("8"))
    s.source = None


def test_gputop_says_in_one_line_which_gpu_it_lacks():
    run = subprocess.run(
        [sys.executable, "-m", "gputop", "snapshot", "--sim-board", "h100x2", "--only", "0,4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines()[-1] == (
        "gputop snapshot: error: --only 4: no GPU 4 on this machine (its GPUs: 0, 1)"
    )
    hidden = subprocess.run(
        [sys.executable, "-m", "gputop", "snapshot", "--json", "--sim-board", "h100x2",
         "--only-visible"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    )  # fmt: skip
    assert hidden.returncode == 0, hidden.stderr
    assert [d["index"] for d in json.loads(hidden.stdout)["devices"]] == [1]
