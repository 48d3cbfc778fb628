"""The NVML source: every GPU's static facts once, and a GpuSample per device per tick.

Talks to the real ``pynvml`` bindings (from nvidia-ml-py), over either the real driver or the
simulated board installed below them. Versioned symbols are probed once per run and the newest
available is used (clock-event -> throttle reasons, memory v2 -> v1, TemperatureV ->
Temperature, processes v3 -> v2). A value NVML will not give becomes None plus a reason in
``na``; GpuIsLost retires that one device; nothing here raises to the caller during sampling.
The monitor never creates a CUDA context: NVML does not need one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pynvml as N

from gputop.model import DeviceInfo, GpuProcess, GpuSample, MigInfo, MigSample
from gputop.sources.gpu_choice import GpuChoice, NoSuchGpu, chosen
from gputop.sources.nvml_errors import NvmlUnavailable, field_reason, init_failure
from gputop.sources.pidns import PidMapper
from gputop.vocab.reasons import decode_reasons

ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
}
GPM_MIN_INTERVAL_S = 0.1
"""GPM's internal refresh: two samples closer than this give no metrics."""
GPM_METRICS = {
    "sm_active_pct": N.NVML_GPM_METRIC_SM_UTIL,
    "sm_occupancy_pct": N.NVML_GPM_METRIC_SM_OCCUPANCY,
    "tensor_active_pct": N.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
    "dram_bw_pct": N.NVML_GPM_METRIC_DRAM_BW_UTIL,
    "gpm_pcie_tx_mibps": N.NVML_GPM_METRIC_PCIE_TX_PER_SEC,
    "gpm_pcie_rx_mibps": N.NVML_GPM_METRIC_PCIE_RX_PER_SEC,
    "gpm_nvlink_tx_mibps": N.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
    "gpm_nvlink_rx_mibps": N.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
}
SLOW_TIER_S = 2.0
"""NVLink counters, process lists, MIG instances, the enforced power limit and the PCIe link's
generation and width are read at most this often: they change slowly or are cumulative, some
are costly (NVLink alone is two field values per link: on an 8-GPU board, 288 a reading), and
rates over a longer window are steadier anyway."""
SLOW_TIER_EARLY = 0.9
"""A reading this fraction of SLOW_TIER_S after the last read reads again: readings are not
exactly spaced, and one a few ms early must not wait a whole interval more."""
LOST = "GPU is lost (fell off the bus): it needs a reset (nvidia-smi -r) or a reboot"
NA_INSTANCE = 0xFFFFFFFF


@dataclass(frozen=True)
class Capabilities:
    """Which versioned NVML entry points this driver has, probed once."""

    driver_version: str
    cuda_version: int | None
    clock_event_reasons: bool
    memory_v2: bool
    temperature_v: bool
    processes_v3: bool
    processes_v2: bool
    gpm: bool
    field_values: bool
    process_utilization: bool


def _has(symbol: str) -> bool:
    try:
        N._nvmlGetFunctionPointer(symbol)
    except N.NVMLError_FunctionNotFound:
        return False
    return True


class _DeviceLost(Exception):
    pass


class _Reader:
    """Reads values for one device; failures become ``na`` reasons, GpuIsLost aborts."""

    def __init__(self, driver_version: str | None) -> None:
        self.driver_version = driver_version
        self.na: dict[str, str] = {}

    def __call__(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except N.NVMLError_GpuIsLost as e:
            raise _DeviceLost(name) from e
        except (N.NVMLError, N.NVMLLibraryMismatchError) as e:
            self.na[name] = field_reason(e, self.driver_version)
        except Exception as e:  # a binding or driver bug must not take the monitor down
            self.na[name] = field_reason(e)
        return None

    def frozen(self) -> MappingProxyType[str, str]:
        return MappingProxyType(dict(self.na))


class _Gpm:
    """Two GPM sample buffers per device, swapped each tick (the two-sample protocol)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.buffers = [N.nvmlGpmSampleAlloc(), N.nvmlGpmSampleAlloc()]
        self.current = 0
        self.last_t: float | None = None
        self.ready = False
        self.values: dict[str, float | None] = {}
        self.na: dict[str, str] = {}

    def read(self, now: float) -> tuple[dict[str, float | None], dict[str, str]]:
        if self.last_t is not None and now - self.last_t < GPM_MIN_INTERVAL_S:
            return self.values, self.na
        N.nvmlGpmSampleGet(self.handle, self.buffers[self.current])
        if self.ready:
            mg = N.c_nvmlGpmMetricsGet_t()
            mg.version = N.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = len(GPM_METRICS)
            mg.sample1 = self.buffers[1 - self.current]
            mg.sample2 = self.buffers[self.current]
            for k, metric_id in enumerate(GPM_METRICS.values()):
                mg.metrics[k].metricId = metric_id
            N.nvmlGpmMetricsGet(mg)
            self.values, self.na = {}, {}
            for k, name in enumerate(GPM_METRICS):
                m = mg.metrics[k]
                if m.nvmlReturn == N.NVML_SUCCESS:
                    self.values[name] = float(m.value)
                else:
                    self.values[name] = None
                    self.na[name] = field_reason(N.NVMLError(m.nvmlReturn))
        else:
            self.values = dict.fromkeys(GPM_METRICS)
            self.na = dict.fromkeys(GPM_METRICS, "warming up: GPM needs two samples 100 ms apart")
        self.ready = True
        self.current = 1 - self.current
        self.last_t = now
        return self.values, self.na

    def close(self) -> None:
        for b in self.buffers:
            with contextlib.suppress(N.NVMLError):
                N.nvmlGpmSampleFree(b)


@dataclass
class _Device:
    info: DeviceInfo
    handle: Any
    mig_handles: list[Any]
    gpm: _Gpm | None
    nvlink_links: int
    nvlink_prev: tuple[float, float, float] | None = None
    """(timestamp us, tx KiB, rx KiB) at the previous tick."""
    util_since_us: int = 0
    lost: str | None = None
    slow: dict[str, tuple[float, Any, dict[str, str]]] = field(default_factory=dict)
    """Slow-tier reads: name -> (time read, value, n/a reasons)."""


class NvmlSource:
    """Open with ``NvmlSource.open()``; call ``sample()`` once per tick; ``close()`` at exit."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        pid_mapper: PidMapper | None = None,
        slow_tier_s: float = SLOW_TIER_S,
        only: GpuChoice | None = None,
    ) -> None:
        """``only``: the GPUs to show and judge (``gpu_choice``; None: every one)."""
        self._only = only
        self._clock = clock
        self.slow_tier_s = slow_tier_s
        self._wall = wall
        self._pids = pid_mapper or PidMapper()
        self._devices: list[_Device] = []
        self.capabilities: Capabilities | None = None
        self._open = False

    @classmethod
    def open(cls, **kwargs: Any) -> NvmlSource:
        """Start NVML and read every device's static facts; NvmlUnavailable if NVML can't run."""
        source = cls(**kwargs)
        try:
            N.nvmlInit()
        except Exception as e:
            raise init_failure(e) from e
        source._open = True
        try:
            source._discover()
        except (NvmlUnavailable, NoSuchGpu):
            source.close()
            raise
        except Exception as e:
            source.close()
            raise init_failure(e) from e
        return source

    @property
    def devices(self) -> tuple[DeviceInfo, ...]:
        return tuple(d.info for d in self._devices)

    # ---- discovery (once) ------------------------------------------------------------------

    def _discover(self) -> None:
        driver = N.nvmlSystemGetDriverVersion()
        try:
            cuda: int | None = N.nvmlSystemGetCudaDriverVersion()
        except N.NVMLError:
            cuda = None
        self.capabilities = Capabilities(
            driver_version=driver,
            cuda_version=cuda,
            clock_event_reasons=_has("nvmlDeviceGetCurrentClocksEventReasons"),
            memory_v2=_has("nvmlDeviceGetMemoryInfo_v2"),
            temperature_v=_has("nvmlDeviceGetTemperatureV"),
            processes_v3=_has("nvmlDeviceGetComputeRunningProcesses_v3"),
            processes_v2=_has("nvmlDeviceGetComputeRunningProcesses_v2"),
            gpm=_has("nvmlGpmQueryDeviceSupport") and _has("nvmlGpmMetricsGet"),
            field_values=_has("nvmlDeviceGetFieldValues"),
            process_utilization=_has("nvmlDeviceGetProcessUtilization"),
        )
        count = N.nvmlDeviceGetCount()
        if count == 0:
            raise NvmlUnavailable("the NVIDIA driver is loaded but reports no GPU")
        for i in range(count):
            self._devices.append(self._discover_device(i))
        keep = chosen(self.devices, self._only)
        if not keep:
            assert self._only is not None
            raise NvmlUnavailable(f"{self._only.origin} leaves no GPU to watch")
        self._devices = [d for d in self._devices if d.info.index in keep]

    def _discover_device(self, i: int) -> _Device:
        caps = self.capabilities
        assert caps is not None
        r = _Reader(caps.driver_version)
        try:
            h = N.nvmlDeviceGetHandleByIndex(i)
        except N.NVMLError as e:
            reason = LOST if isinstance(e, N.NVMLError_GpuIsLost) else field_reason(e)
            info = _unknown_device(i, reason)
            return _Device(
                info=info, handle=None, mig_handles=[], gpm=None, nvlink_links=0, lost=reason
            )
        try:
            return self._read_static(i, h, r)
        except _DeviceLost:
            info = _unknown_device(i, LOST)
            return _Device(info=info, handle=h, mig_handles=[], gpm=None, nvlink_links=0, lost=LOST)

    def _read_static(self, i: int, h: Any, r: _Reader) -> _Device:
        caps = self.capabilities
        assert caps is not None
        pci = r("pci", N.nvmlDeviceGetPciInfo, h)
        arch = r("architecture", N.nvmlDeviceGetArchitecture, h)
        limits = r("power_limits", N.nvmlDeviceGetPowerManagementLimitConstraints, h)
        default_limit = r("default_power_limit_w", N.nvmlDeviceGetPowerManagementDefaultLimit, h)
        mem = self._memory(r, h)
        links = self._nvlink_count(r, h)
        gpm = self._open_gpm(r, h)
        mig_mode = r("mig_enabled", N.nvmlDeviceGetMigMode, h)
        mig_enabled = bool(mig_mode[0]) if mig_mode is not None else None
        mig_handles, mig_infos = self._discover_mig(i, h) if mig_enabled else ([], ())
        threshold = {
            "temp_shutdown_c": N.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN,
            "temp_slowdown_c": N.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
            "temp_gpu_max_c": N.NVML_TEMPERATURE_THRESHOLD_GPU_MAX,
            "temp_mem_max_c": N.NVML_TEMPERATURE_THRESHOLD_MEM_MAX,
        }
        temps = {k: r(k, N.nvmlDeviceGetTemperatureThreshold, h, v) for k, v in threshold.items()}
        if "power_limits" in r.na:
            r.na["min_power_limit_w"] = r.na["max_power_limit_w"] = r.na.pop("power_limits")
        if "pci" in r.na:
            r.na["pci_bus_id"] = r.na["pci_device_id"] = r.na.pop("pci")
        if "memory" in r.na:
            r.na["mem_total_bytes"] = r.na.pop("memory")
        info = DeviceInfo(
            index=i,
            name=r("name", N.nvmlDeviceGetName, h),
            uuid=r("uuid", N.nvmlDeviceGetUUID, h),
            pci_bus_id=_text(pci.busId) if pci is not None else None,
            pci_device_id=int(pci.pciDeviceId) if pci is not None else None,
            architecture=ARCHITECTURES.get(arch, f"unknown ({arch})") if arch is not None else None,
            max_sm_clock_mhz=r("max_sm_clock_mhz", N.nvmlDeviceGetMaxClockInfo, h, N.NVML_CLOCK_SM),
            max_graphics_clock_mhz=r(
                "max_graphics_clock_mhz", N.nvmlDeviceGetMaxClockInfo, h, N.NVML_CLOCK_GRAPHICS
            ),
            max_mem_clock_mhz=r(
                "max_mem_clock_mhz", N.nvmlDeviceGetMaxClockInfo, h, N.NVML_CLOCK_MEM
            ),
            default_power_limit_w=_watts(default_limit),
            min_power_limit_w=_watts(limits[0]) if limits else None,
            max_power_limit_w=_watts(limits[1]) if limits else None,
            mem_total_bytes=mem[0] if mem else None,
            temp_shutdown_c=temps["temp_shutdown_c"],
            temp_slowdown_c=temps["temp_slowdown_c"],
            temp_gpu_max_c=temps["temp_gpu_max_c"],
            temp_mem_max_c=temps["temp_mem_max_c"],
            pcie_max_gen=r("pcie_max_gen", N.nvmlDeviceGetMaxPcieLinkGeneration, h),
            pcie_max_width=r("pcie_max_width", N.nvmlDeviceGetMaxPcieLinkWidth, h),
            nvlink_links=links,
            gpm_supported=gpm is not None,
            mig_enabled=mig_enabled,
            mig=mig_infos,
            na=r.frozen(),
        )
        return _Device(
            info=info, handle=h, mig_handles=mig_handles, gpm=gpm, nvlink_links=links or 0
        )

    def _nvlink_count(self, r: _Reader, h: Any) -> int | None:
        if not self.capabilities or not self.capabilities.field_values:
            r.na["nvlink_links"] = field_reason(N.NVMLError(N.NVML_ERROR_FUNCTION_NOT_FOUND))
            return None
        values = r("nvlink_links", N.nvmlDeviceGetFieldValues, h, [N.NVML_FI_DEV_NVLINK_LINK_COUNT])
        if values is None:
            return None
        if values[0].nvmlReturn != N.NVML_SUCCESS:
            r.na["nvlink_links"] = field_reason(N.NVMLError(values[0].nvmlReturn))
            return None
        return int(values[0].value.uiVal)

    def _open_gpm(self, r: _Reader, h: Any) -> _Gpm | None:
        caps = self.capabilities
        if not caps or not caps.gpm:
            r.na["gpm"] = f"not in this driver ({caps.driver_version if caps else '?'})"
            return None
        support = r("gpm", N.nvmlGpmQueryDeviceSupport, h)
        if support is None:
            return None
        if not support.isSupportedDevice:
            r.na["gpm"] = "needs a Hopper or newer GPU"
            return None
        try:
            return _Gpm(h)
        except N.NVMLError as e:
            r.na["gpm"] = field_reason(e, caps.driver_version)
            return None

    def _discover_mig(self, i: int, h: Any) -> tuple[list[Any], tuple[MigInfo, ...]]:
        caps = self.capabilities
        handles: list[Any] = []
        infos: list[MigInfo] = []
        try:
            slots = N.nvmlDeviceGetMaxMigDeviceCount(h)
        except N.NVMLError:
            return [], ()
        for k in range(slots):
            try:
                mh = N.nvmlDeviceGetMigDeviceHandleByIndex(h, k)
            except N.NVMLError:
                continue  # an empty slot (NotFound) or one we may not see
            r = _Reader(caps.driver_version if caps else None)
            mem = self._memory(r, mh)
            infos.append(
                MigInfo(
                    parent_index=i,
                    mig_index=len(handles),
                    name=r("name", N.nvmlDeviceGetName, mh),
                    uuid=r("uuid", N.nvmlDeviceGetUUID, mh),
                    gpu_instance_id=r("gpu_instance_id", N.nvmlDeviceGetGpuInstanceId, mh),
                    compute_instance_id=r(
                        "compute_instance_id", N.nvmlDeviceGetComputeInstanceId, mh
                    ),
                    mem_total_bytes=mem[0] if mem else None,
                    na=r.frozen(),
                )
            )
            handles.append(mh)
        return handles, tuple(infos)

    # ---- per tick ----------------------------------------------------------------------------

    def sample(self, fresh: bool = False) -> list[GpuSample]:
        """One GpuSample per physical device, in index order. Never raises for a device fault.

        ``fresh``: read the slow tier (NVLink, processes, MIG) now even if it was read less than
        ``slow_tier_s`` ago, so a one-shot reading's NVLink rate spans the gap since the first
        reading instead of being missing (NVLink counters are cumulative: any gap gives a rate)."""
        t = self._clock()
        wall = self._wall()
        out = []
        for dev in self._devices:
            if dev.lost is None:
                try:
                    out.append(self._sample_device(dev, t, wall, fresh))
                    continue
                except _DeviceLost:
                    dev.lost = LOST
            out.append(GpuSample(index=dev.info.index, t=t, wall=wall, lost=dev.lost))
        self._pids.end_tick()
        return out

    def _sample_device(self, dev: _Device, t: float, wall: float, fresh: bool) -> GpuSample:
        caps = self.capabilities
        assert caps is not None
        h = dev.handle
        r = _Reader(caps.driver_version)
        mem = self._memory(r, h)
        if "memory" in r.na:
            reason = r.na.pop("memory")
            for k in ("mem_used_bytes", "mem_reserved_bytes", "mem_free_bytes"):
                r.na[k] = reason
        elif mem and mem[1] is None:
            r.na["mem_reserved_bytes"] = f"not in this driver ({caps.driver_version})"
        if caps.clock_event_reasons:
            mask = r("reasons_mask", N.nvmlDeviceGetCurrentClocksEventReasons, h)
        else:
            mask = r("reasons_mask", N.nvmlDeviceGetCurrentClocksThrottleReasons, h)
        util = r("util", N.nvmlDeviceGetUtilizationRates, h)
        if "util" in r.na:
            r.na["util_gpu_pct"] = r.na["util_mem_pct"] = r.na.pop("util")
        power = r("power_w", N.nvmlDeviceGetPowerUsage, h)
        limit, pcie_gen, pcie_width = self._slow(
            dev, "limits", t, r, lambda sub: _limits(sub, h), fresh
        )
        energy = r("energy_j", N.nvmlDeviceGetTotalEnergyConsumption, h)
        if caps.temperature_v:
            temp = r("temp_c", N.nvmlDeviceGetTemperatureV, h, N.NVML_TEMPERATURE_GPU)
        else:
            temp = r("temp_c", N.nvmlDeviceGetTemperature, h, N.NVML_TEMPERATURE_GPU)
        gpm_values: dict[str, Any] = {}  # GpuSample's GPM fields by name: floats or None
        if dev.gpm is not None:
            try:
                gpm_values, gpm_na = dev.gpm.read(t)
                r.na.update(gpm_na)
            except N.NVMLError_GpuIsLost as e:
                raise _DeviceLost("gpm") from e
            except N.NVMLError as e:
                r.na.update(dict.fromkeys(GPM_METRICS, field_reason(e, caps.driver_version)))
        else:
            reason = dev.info.na.get("gpm", "not supported on this GPU")
            r.na.update(dict.fromkeys(GPM_METRICS, reason))
        nv_tx, nv_rx = self._slow(
            dev, "nvlink", t, r, lambda sub: self._nvlink_rates(dev, sub), fresh
        )
        processes = self._slow(
            dev, "processes", t, r, lambda sub: self._processes(dev, sub, h), fresh
        )
        mig = self._slow(
            dev,
            "mig",
            t,
            r,
            lambda _: tuple(self._sample_mig(k, mh) for k, mh in enumerate(dev.mig_handles)),
            fresh,
        )
        return GpuSample(
            index=dev.info.index,
            t=t,
            wall=wall,
            sm_clock_mhz=r("sm_clock_mhz", N.nvmlDeviceGetClockInfo, h, N.NVML_CLOCK_SM),
            graphics_clock_mhz=r(
                "graphics_clock_mhz", N.nvmlDeviceGetClockInfo, h, N.NVML_CLOCK_GRAPHICS
            ),
            mem_clock_mhz=r("mem_clock_mhz", N.nvmlDeviceGetClockInfo, h, N.NVML_CLOCK_MEM),
            power_w=_watts(power),
            power_limit_w=_watts(limit),
            energy_j=energy / 1000.0 if energy is not None else None,
            temp_c=temp,
            util_gpu_pct=int(util.gpu) if util is not None else None,
            util_mem_pct=int(util.memory) if util is not None else None,
            mem_used_bytes=mem[2] if mem else None,
            mem_reserved_bytes=mem[1] if mem else None,
            mem_free_bytes=mem[3] if mem else None,
            reasons_mask=mask,
            reasons=decode_reasons(mask) if mask is not None else (),
            pcie_tx_kbps=r(
                "pcie_tx_kbps", N.nvmlDeviceGetPcieThroughput, h, N.NVML_PCIE_UTIL_TX_BYTES
            ),
            pcie_rx_kbps=r(
                "pcie_rx_kbps", N.nvmlDeviceGetPcieThroughput, h, N.NVML_PCIE_UTIL_RX_BYTES
            ),
            pcie_gen=pcie_gen,
            pcie_width=pcie_width,
            nvlink_tx_kibps=nv_tx,
            nvlink_rx_kibps=nv_rx,
            processes=processes,
            mig=mig,
            na=r.frozen(),
            **gpm_values,
        )

    def _slow(
        self,
        dev: _Device,
        name: str,
        t: float,
        r: _Reader,
        read: Callable[[_Reader], Any],
        fresh: bool = False,
    ) -> Any:
        """``read`` at most once per ``slow_tier_s`` (always when ``fresh``); in between, its
        last value and reasons."""
        hit = dev.slow.get(name)
        if not fresh and hit is not None and 0 <= t - hit[0] < self.slow_tier_s * SLOW_TIER_EARLY:
            r.na.update(hit[2])
            return hit[1]
        sub = _Reader(r.driver_version)
        value = read(sub)
        dev.slow[name] = (t, value, dict(sub.na))
        r.na.update(sub.na)
        return value

    def _memory(self, r: _Reader, h: Any) -> tuple[int, int | None, int, int] | None:
        """(total, reserved or None on v1, used, free) bytes."""
        caps = self.capabilities
        if caps and caps.memory_v2:
            m = r("memory", N.nvmlDeviceGetMemoryInfo, h, N.nvmlMemory_v2)
            return (m.total, m.reserved, m.used, m.free) if m is not None else None
        m = r("memory", N.nvmlDeviceGetMemoryInfo, h)
        return (m.total, None, m.used, m.free) if m is not None else None

    def _nvlink_rates(self, dev: _Device, r: _Reader) -> tuple[float | None, float | None]:
        if not dev.nvlink_links:
            reason = dev.info.na.get("nvlink_links", "no NVLink on this GPU")
            r.na["nvlink_tx_kibps"] = r.na["nvlink_rx_kibps"] = reason
            return None, None
        ids = [(N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, link) for link in range(dev.nvlink_links)]
        ids += [(N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, link) for link in range(dev.nvlink_links)]
        values = r("nvlink", N.nvmlDeviceGetFieldValues, dev.handle, ids)
        if values is None:
            reason = r.na.pop("nvlink")
            r.na["nvlink_tx_kibps"] = r.na["nvlink_rx_kibps"] = reason
            return None, None
        failed = [v for v in values if v.nvmlReturn != N.NVML_SUCCESS]
        if failed:
            reason = field_reason(N.NVMLError(failed[0].nvmlReturn))
            r.na["nvlink_tx_kibps"] = r.na["nvlink_rx_kibps"] = reason
            return None, None
        n = dev.nvlink_links
        ts = max(v.timestamp for v in values)
        tx = float(sum(v.value.ullVal for v in values[:n]))
        rx = float(sum(v.value.ullVal for v in values[n:]))
        prev, dev.nvlink_prev = dev.nvlink_prev, (ts, tx, rx)
        if prev is None or ts <= prev[0] or tx < prev[1] or rx < prev[2]:
            r.na["nvlink_tx_kibps"] = r.na["nvlink_rx_kibps"] = "needs two samples"
            return None, None
        dt = (ts - prev[0]) / 1e6
        return (tx - prev[1]) / dt, (rx - prev[2]) / dt

    def _running(self, r: _Reader, h: Any) -> list[Any] | None:
        caps = self.capabilities
        assert caps is not None
        if caps.processes_v3:
            return r("processes", N.nvmlDeviceGetComputeRunningProcesses_v3, h)
        if caps.processes_v2:
            return r("processes", N.nvmlDeviceGetComputeRunningProcesses_v2, h)
        r.na["processes"] = f"not in this driver ({caps.driver_version})"
        return None

    def _processes(self, dev: _Device, r: _Reader, h: Any) -> tuple[GpuProcess, ...]:
        running = self._running(r, h)
        if not running:
            return ()
        util: dict[int, Any] = {}
        caps = self.capabilities
        if caps and caps.process_utilization:
            try:
                samples = N.nvmlDeviceGetProcessUtilization(h, dev.util_since_us)
            except N.NVMLError_NotFound:
                samples = []  # no kernel ran since the last look: idle, not an error
            except N.NVMLError_GpuIsLost as e:
                raise _DeviceLost("process_util") from e
            except N.NVMLError as e:
                samples = None
                r.na["process_util"] = field_reason(e, caps.driver_version)
            if samples is not None:
                for s in samples:
                    if s.pid not in util or s.timeStamp > util[s.pid].timeStamp:
                        util[s.pid] = s
                    dev.util_since_us = max(dev.util_since_us, int(s.timeStamp))
                util_known = True
            else:
                util_known = False
        else:
            util_known = False
            r.na["process_util"] = f"not in this driver ({caps.driver_version if caps else '?'})"
        return tuple(self._process(p, util.get(p.pid), util_known) for p in running)

    def _process(self, p: Any, util: Any, util_known: bool) -> GpuProcess:
        m = self._pids(int(p.pid))
        gi = getattr(p, "gpuInstanceId", NA_INSTANCE)
        ci = getattr(p, "computeInstanceId", NA_INSTANCE)
        return GpuProcess(
            pid=int(p.pid),
            local_pid=m.local_pid,
            container_pid=m.container_pid,
            used_mem_bytes=p.usedGpuMemory,
            sm_util_pct=int(util.smUtil) if util is not None else (0 if util_known else None),
            mem_util_pct=int(util.memUtil) if util is not None else (0 if util_known else None),
            gpu_instance_id=None if gi in (None, NA_INSTANCE) else int(gi),
            compute_instance_id=None if ci in (None, NA_INSTANCE) else int(ci),
            note=m.note,
        )

    def _sample_mig(self, k: int, mh: Any) -> MigSample:
        caps = self.capabilities
        r = _Reader(caps.driver_version if caps else None)
        mem = self._memory(r, mh)
        running = self._running(r, mh) or []
        procs = tuple(self._process(p, None, False) for p in running)
        return MigSample(
            mig_index=k,
            mem_used_bytes=mem[2] if mem else None,
            mem_total_bytes=mem[0] if mem else None,
            processes=procs,
            na=r.frozen(),
        )

    def close(self) -> None:
        """Free GPM buffers and shut NVML down; safe to call twice."""
        for d in self._devices:
            if d.gpm is not None:
                d.gpm.close()
                d.gpm = None
        if self._open:
            self._open = False
            with contextlib.suppress(N.NVMLError):
                N.nvmlShutdown()


def _limits(r: _Reader, h: Any) -> tuple[Any, Any, Any]:
    """The slow tier's read of the enforced power limit and the PCIe link's generation and
    width (mW, generation, lanes)."""
    return (
        r("power_limit_w", N.nvmlDeviceGetEnforcedPowerLimit, h),
        r("pcie_gen", N.nvmlDeviceGetCurrPcieLinkGeneration, h),
        r("pcie_width", N.nvmlDeviceGetCurrPcieLinkWidth, h),
    )


def _watts(milliwatts: int | None) -> float | None:
    return milliwatts / 1000.0 if milliwatts is not None else None


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _unknown_device(i: int, reason: str) -> DeviceInfo:
    fields = ("name", "uuid", "pci_bus_id", "mem_total_bytes")
    return DeviceInfo(
        index=i,
        name=None,
        uuid=None,
        pci_bus_id=None,
        pci_device_id=None,
        architecture=None,
        max_sm_clock_mhz=None,
        max_graphics_clock_mhz=None,
        max_mem_clock_mhz=None,
        default_power_limit_w=None,
        min_power_limit_w=None,
        max_power_limit_w=None,
        mem_total_bytes=None,
        temp_shutdown_c=None,
        temp_slowdown_c=None,
        temp_gpu_max_c=None,
        temp_mem_max_c=None,
        pcie_max_gen=None,
        pcie_max_width=None,
        nvlink_links=None,
        gpm_supported=False,
        mig_enabled=None,
        na=MappingProxyType(dict.fromkeys(fields, reason)),
    )
