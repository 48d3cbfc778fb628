"""Board profiles for the simulated GPUs, written from real `nvidia-smi -q -x` captures.

Static facts (names, clocks, limits, thresholds, memory, PCIe link) are the values those idle
captures report; `tests/integration/test_sim_boards_vs_captures.py` checks them against the
capture files whenever `../shared/fixtures/nvidia-smi/` is present. The dynamic constants (power
at full load, thermal resistance, time constants) are not in any capture: they are modelling
choices, named as such, so that busy behaviour is plausible rather than recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputop.errors import BadUsage

MIB = 1024 * 1024


@dataclass(frozen=True)
class BoardProfile:
    """A GPU model for the simulator: static facts from real captures, busy behaviour from modelling
    choices."""

    key: str
    name: str
    architecture: str
    nvml_arch: int
    """NVML_DEVICE_ARCH_* value."""
    default_driver: str
    """The driver generation (drivers.DRIVERS key) of the board's capture: what it runs when
    the user names none."""
    pci_device_id: int
    pci_bus_ids: tuple[str, ...]
    """Bus ids of the captured board(s); more devices than captured get synthesised ids."""
    # clocks, MHz
    max_sm_clock: int
    max_mem_clock: int
    max_video_clock: int
    idle_sm_clock: int
    idle_mem_clock: int
    idle_video_clock: int
    """The capture's idle video clock: it does not scale with the SM clock at idle (H100 idles
    at 765 MHz video under 345 MHz SM)."""
    min_sm_clock: int
    clock_step: int
    # power, W
    power_limit: float
    power_min: float
    power_max: float
    idle_power: float
    power_is_averaged: bool
    """Ampere and later (not GA100) average power over 1 s; older boards report it instantly."""
    # temperature, deg C
    idle_temp: float
    temp_shutdown: int
    temp_slowdown: int
    temp_gpu_max: int
    temp_mem_max: int | None
    # memory, bytes
    mem_total: int
    mem_reserved: int
    # PCIe
    pcie_max_gen: int
    pcie_max_width: int
    pcie_cur_gen: int
    pcie_cur_width: int
    idle_pcie_tx_kbps: int
    idle_pcie_rx_kbps: int
    # capabilities
    nvlink_links: int
    nvlink_link_gbps: float
    """Per link, per direction, GB/s."""
    gpm: bool
    """NVML GPM exists on Hopper and newer only."""
    mig_capable: bool
    mig_profiles: tuple[tuple[str, int], ...] = ()
    """(profile name, memory MiB) of the instances created when MIG is turned on."""
    # modelling choices (not from captures)
    full_load_power_frac: float = 0.93
    """Power demanded at full activity and max clock, as a fraction of the default limit."""
    thermal_resistance: float = 0.06
    """Kelvin per watt above idle power: steady-state temperature rise."""
    thermal_tau_s: float = 40.0
    # facts real NVML clients (nvitop, gpustat) read; defaults are what every capture shows
    bar1_total_mib: int = 0
    bar1_used_mib: int = 0
    """BAR1 (the PCIe aperture onto device memory), idle, as the capture's bar1_memory_usage."""
    cuda_capability: tuple[int, int] = (0, 0)
    """Compute capability (nvmlDeviceGetCudaComputeCapability): the architecture's, from
    NVIDIA's CUDA GPU list; not in the captures."""
    ecc_aggregate_corrected: int = 0
    """Lifetime corrected ECC errors (capture: ecc_errors/aggregate, dram + sram correctable);
    every volatile and uncorrected counter in the captures is 0."""
    serial_base: int = 1650000000001
    """Device i reports serial ``serial_base + i`` (the captures' scrubbed serials run
    1650000000001..1650000000008 in bus order)."""
    persistence_mode: bool = True
    """Every capture: persistence_mode Enabled (so idle boards sit in P0)."""
    has_fan: bool = False
    """Passively cooled data-centre boards: every capture's fan_speed is N/A (NOT_SUPPORTED)."""


# Facts below are from qx-h100.xml (driver 580.105.08): 8x H100 80GB HBM3, idle.
# Temperatures there are T.Limit-relative: GPU max operating = temp + tlimit (29 + 58 = 87),
# slowdown 2 C past it (89), shutdown 8 C past it (95), memory max given only as 0 C margin.
H100 = BoardProfile(
    key="h100",
    name="NVIDIA H100 80GB HBM3",
    architecture="Hopper",
    nvml_arch=9,
    default_driver="r580",
    pci_device_id=0x233010DE,
    pci_bus_ids=(
        "00000000:53:00.0",
        "00000000:64:00.0",
        "00000000:75:00.0",
        "00000000:86:00.0",
        "00000000:97:00.0",
        "00000000:A8:00.0",
        "00000000:B9:00.0",
        "00000000:CA:00.0",
    ),
    max_sm_clock=1980,
    max_mem_clock=2619,
    max_video_clock=1545,
    idle_sm_clock=345,
    idle_mem_clock=2619,
    idle_video_clock=765,
    min_sm_clock=345,
    clock_step=15,
    power_limit=700.0,
    power_min=200.0,
    power_max=700.0,
    idle_power=68.5,
    power_is_averaged=True,
    idle_temp=30.0,
    temp_shutdown=95,
    temp_slowdown=89,
    temp_gpu_max=87,
    temp_mem_max=95,
    mem_total=81559 * MIB,
    mem_reserved=480 * MIB,
    pcie_max_gen=5,
    pcie_max_width=16,
    pcie_cur_gen=5,
    pcie_cur_width=16,
    idle_pcie_tx_kbps=510,
    idle_pcie_rx_kbps=480,
    nvlink_links=18,
    nvlink_link_gbps=25.0,
    gpm=True,
    mig_capable=True,
    mig_profiles=(("3g.40gb", 40192), ("3g.40gb", 40192)),
    thermal_resistance=0.055,
    bar1_total_mib=131072,
    bar1_used_mib=1,
    cuda_capability=(9, 0),
)

# Facts from qx-a100.xml (driver 570.148.08): 1x A100-SXM4-40GB, idle. GA100 power is instantaneous.
A100 = BoardProfile(
    key="a100",
    name="NVIDIA A100-SXM4-40GB",
    architecture="Ampere",
    nvml_arch=7,
    default_driver="r570",
    pci_device_id=0x20B010DE,
    pci_bus_ids=("00000000:06:00.0",),
    max_sm_clock=1410,
    max_mem_clock=1215,
    max_video_clock=1290,
    idle_sm_clock=210,
    idle_mem_clock=1215,
    idle_video_clock=585,
    min_sm_clock=210,
    clock_step=15,
    power_limit=400.0,
    power_min=100.0,
    power_max=400.0,
    idle_power=49.7,
    power_is_averaged=False,
    idle_temp=33.0,
    temp_shutdown=92,
    temp_slowdown=89,
    temp_gpu_max=85,
    temp_mem_max=95,
    mem_total=40960 * MIB,
    mem_reserved=518 * MIB,
    pcie_max_gen=4,
    pcie_max_width=16,
    pcie_cur_gen=4,
    pcie_cur_width=16,
    idle_pcie_tx_kbps=350,
    idle_pcie_rx_kbps=300,
    nvlink_links=12,
    nvlink_link_gbps=25.0,
    gpm=False,
    mig_capable=True,
    mig_profiles=(("3g.20gb", 19968), ("3g.20gb", 19968)),
    thermal_resistance=0.075,
    bar1_total_mib=65536,
    bar1_used_mib=1,
    cuda_capability=(8, 0),
)

# Facts from qx-l40s.xml (driver 595.91.07): 1x L40S, idle, PCIe link trained at x8 of x16.
# T.Limit-relative: max operating 29 + 59 = 88, slowdown 90 (-2), shutdown 93 (-5).
L40S = BoardProfile(
    key="l40s",
    name="NVIDIA L40S",
    architecture="Ada Lovelace",
    nvml_arch=8,
    default_driver="r595",
    pci_device_id=0x26B910DE,
    pci_bus_ids=("00000000:30:00.0",),
    max_sm_clock=2520,
    max_mem_clock=9001,
    max_video_clock=1965,
    idle_sm_clock=2040,
    idle_mem_clock=9001,
    idle_video_clock=1725,
    min_sm_clock=210,
    clock_step=15,
    power_limit=350.0,
    power_min=100.0,
    power_max=350.0,
    idle_power=66.0,
    power_is_averaged=True,
    idle_temp=29.0,
    temp_shutdown=93,
    temp_slowdown=90,
    temp_gpu_max=88,
    temp_mem_max=None,
    mem_total=46068 * MIB,
    mem_reserved=609 * MIB,
    pcie_max_gen=4,
    pcie_max_width=16,
    pcie_cur_gen=4,
    pcie_cur_width=8,
    idle_pcie_tx_kbps=585,
    idle_pcie_rx_kbps=292,
    nvlink_links=0,
    nvlink_link_gbps=0.0,
    gpm=False,
    mig_capable=False,
    thermal_resistance=0.16,
    thermal_tau_s=60.0,
    bar1_total_mib=65536,
    bar1_used_mib=0,
    cuda_capability=(8, 9),
)

# Facts from qx-t4.xml (driver 595.91.07): 1x Tesla T4, idle at full clock, PCIe x8 of x16.
T4 = BoardProfile(
    key="t4",
    name="Tesla T4",
    architecture="Turing",
    nvml_arch=6,
    default_driver="r595",
    pci_device_id=0x1EB810DE,
    pci_bus_ids=("00000000:00:1E.0",),
    max_sm_clock=1590,
    max_mem_clock=5001,
    max_video_clock=1470,
    idle_sm_clock=1590,
    idle_mem_clock=5000,
    idle_video_clock=1470,
    min_sm_clock=300,
    clock_step=15,
    power_limit=70.0,
    power_min=60.0,
    power_max=70.0,
    idle_power=33.5,
    power_is_averaged=False,
    idle_temp=33.0,
    temp_shutdown=96,
    temp_slowdown=93,
    temp_gpu_max=85,
    temp_mem_max=None,
    mem_total=15360 * MIB,
    mem_reserved=448 * MIB,
    pcie_max_gen=3,
    pcie_max_width=16,
    pcie_cur_gen=3,
    pcie_cur_width=8,
    idle_pcie_tx_kbps=439,
    idle_pcie_rx_kbps=292,
    nvlink_links=0,
    nvlink_link_gbps=0.0,
    gpm=False,
    mig_capable=False,
    thermal_resistance=1.1,
    thermal_tau_s=60.0,
    bar1_total_mib=256,
    bar1_used_mib=2,
    cuda_capability=(7, 5),
    ecc_aggregate_corrected=1,
)

BOARDS: dict[str, BoardProfile] = {b.key: b for b in (H100, A100, L40S, T4)}

_SPEC = re.compile(r"^(?P<key>[a-z0-9]+?)(?:x(?P<count>\d+))?(?P<mig>-mig)?$")


@dataclass(frozen=True)
class BoardSpec:
    """A board as the user names it (``h100x8``, ``a100-mig``): profile, count, MIG or not."""

    profile: BoardProfile
    count: int
    mig: bool

    @property
    def label(self) -> str:
        return f"{self.count}x {self.profile.name}" + (" (MIG)" if self.mig else "")


class SimConfigError(BadUsage):
    """A simulated board, driver or scenario the user asked for does not exist."""

    when = "--sim-driver or --sim-scenario without --sim-board"


class UnknownBoard(SimConfigError):
    """A board that cannot be simulated: an unknown name, a count outside 1..64, or MIG it lacks."""

    when = "a --sim-board with an unknown name, a count outside 1..64, or MIG the board lacks"


def parse_board(spec: str) -> BoardSpec:
    """``h100`` (one device), ``h100x8``, ``t4x2``, ``a100-mig``: a board and a count."""
    m = _SPEC.match(spec.strip().lower())
    if not m or m["key"] not in BOARDS:
        known = ", ".join(sorted(BOARDS))
        raise UnknownBoard(
            f"unknown simulated board {spec!r}: use one of {known}, optionally with a count "
            f"(h100x8) and -mig (a100-mig)"
        )
    profile = BOARDS[m["key"]]
    count = int(m["count"]) if m["count"] else 1
    if not 1 <= count <= 64:
        raise UnknownBoard(f"simulated board count must be 1..64, got {count}")
    if m["mig"] and not profile.mig_capable:
        raise UnknownBoard(f"{profile.name} does not support MIG")
    return BoardSpec(profile=profile, count=count, mig=bool(m["mig"]))
