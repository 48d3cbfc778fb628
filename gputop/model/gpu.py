"""GPU facts and samples: what one device is (static) and what it did at one instant.

Every field that NVML could not give is ``None`` and its name is a key of ``na``, mapped to a
one-line reason ("not supported on this GPU", "not in driver 470.256.02"). A reader never has to
catch an exception to learn that a value is missing, and the UI can say *why* it is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

NO_REASONS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class MigInfo:
    """A MIG instance carved out of a physical GPU."""

    parent_index: int
    mig_index: int
    name: str | None
    uuid: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    mem_total_bytes: int | None
    na: Mapping[str, str] = field(default_factory=lambda: NO_REASONS)


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """Facts about one physical GPU that do not change while gputop runs."""

    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    pci_device_id: int | None
    architecture: str | None
    max_sm_clock_mhz: int | None
    max_graphics_clock_mhz: int | None
    max_mem_clock_mhz: int | None
    default_power_limit_w: float | None
    min_power_limit_w: float | None
    max_power_limit_w: float | None
    mem_total_bytes: int | None
    temp_shutdown_c: int | None
    temp_slowdown_c: int | None
    temp_gpu_max_c: int | None
    temp_mem_max_c: int | None
    pcie_max_gen: int | None
    pcie_max_width: int | None
    nvlink_links: int | None
    gpm_supported: bool
    mig_enabled: bool | None
    mig: tuple[MigInfo, ...] = ()
    na: Mapping[str, str] = field(default_factory=lambda: NO_REASONS)


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process NVML sees on a GPU, with its PID mapped into gputop's PID namespace."""

    pid: int
    """The PID as NVML reports it (a host PID, also inside containers)."""
    local_pid: int | None
    """The same process in gputop's own /proc, or None when it is not visible here."""
    container_pid: int | None
    """The PID inside the process's own (innermost) namespace when it differs from ``pid``."""
    used_mem_bytes: int | None
    sm_util_pct: int | None
    mem_util_pct: int | None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class MigSample:
    """What one MIG instance reports now."""

    mig_index: int
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    processes: tuple[GpuProcess, ...] = ()
    na: Mapping[str, str] = field(default_factory=lambda: NO_REASONS)


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One reading of one GPU. ``t`` is a monotonic-clock time, ``wall`` the epoch time."""

    index: int
    t: float
    wall: float
    lost: str | None = None
    """Why the device is gone (GPU fell off the bus); every other field is then None."""
    sm_clock_mhz: int | None = None
    graphics_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None
    temp_c: int | None = None
    util_gpu_pct: int | None = None
    util_mem_pct: int | None = None
    mem_used_bytes: int | None = None
    mem_reserved_bytes: int | None = None
    mem_free_bytes: int | None = None
    reasons_mask: int | None = None
    reasons: tuple[str, ...] = ()
    pcie_tx_kbps: int | None = None
    pcie_rx_kbps: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    nvlink_tx_kibps: float | None = None
    nvlink_rx_kibps: float | None = None
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_bw_pct: float | None = None
    gpm_pcie_tx_mibps: float | None = None
    gpm_pcie_rx_mibps: float | None = None
    gpm_nvlink_tx_mibps: float | None = None
    gpm_nvlink_rx_mibps: float | None = None
    processes: tuple[GpuProcess, ...] = ()
    mig: tuple[MigSample, ...] = ()
    na: Mapping[str, str] = field(default_factory=lambda: NO_REASONS)

    @property
    def key(self) -> tuple[str, int]:
        """The Timeline series this sample belongs to."""
        return ("gpu", self.index)
