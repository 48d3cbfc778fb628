"""A fake ``libnvidia-ml``: the NVML C entry points, implemented over a SimBoard.

Installed as ``pynvml.nvmlLib``, it receives exactly the ctypes arguments the real library would
(handles as opaque pointers, out-parameters through ``byref``, caller-allocated arrays and
strings) and answers with ``NVML_*`` return codes. So the real pynvml wrappers, structs, error
classes and two-call buffer protocols all run unchanged on a machine with no GPU.
"""

from __future__ import annotations

import ctypes
import itertools
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pynvml as N

from gputop.sim.activity import Counters, pcie_bytes_per_s
from gputop.sim.board import SimBoard, SimDevice
from gputop.sim.boards import BoardProfile
from gputop.sim.drivers import branch

DEVICE_TOKEN = 0x10000
GPM_TOKEN_BASE = 0x7F000000
MAX_MIG_DEVICES = 7

V1_COUNTS_RESERVED_FROM = 510
"""The branch from which nvmlDeviceGetMemoryInfo (v1) counts the driver's reservation as used:
idle boards read ~0 MiB used before it and ~reserved (480 MiB on H100) from it (gpustat #141;
docs/facts/nvml-signals.md, "Memory used and the reservation"). Before it, the reservation was
left out of the total instead: a T4 reads 15109 MiB total on R470 (nvidia-smi outputs users
posted) against the 15360 MiB of the 595 capture. The simulator keeps one reservation per board
(the capture's, 448 MiB on T4, where R470's was 251 MiB), so its R470 total is the capture's
total minus that reservation."""
MIB = 1024 * 1024
CODEC_SAMPLE_PERIOD_US = 167_000
"""Encoder/decoder utilisation sample period: a modelling choice (the header's shortest
utilisation period, 1/6 s); no capture shows it."""
DISPLAY_MODE_DEPRECATED_FROM = 580
"""nvidia-smi prints display_mode as "Requested functionality has been deprecated" in the 580
and 595 captures (H100, L40S, T4) and "Enabled" in the 570 one (A100)."""


def _val(x: Any) -> int:
    """An integer argument, whether passed as a Python int or a ctypes scalar."""
    return int(x.value) if hasattr(x, "value") else int(x)


def _out(arg: Any) -> Any:
    """The object behind a ``byref(...)`` argument."""
    return arg._obj


def _token(ptr: Any) -> int:
    return ctypes.cast(ptr, ctypes.c_void_p).value or 0


def _set_pointer(ptr_obj: Any, token: int) -> None:
    ctypes.cast(ctypes.pointer(ptr_obj), ctypes.POINTER(ctypes.c_void_p)).contents.value = token


def _device_entry(fn: Callable[..., int]) -> Callable[..., int]:
    """Resolve the handle (first argument) to (device index, MIG index), apply faults, count."""
    symbol = fn.__name__

    def entry(self: FakeNvmlLib, handle: Any, *args: Any) -> int:
        if self.board.measure_cpu:
            t0 = time.thread_time()
            try:
                return entry_body(self, handle, *args)
            finally:
                self.board.sim_cpu_s += time.thread_time() - t0
        return entry_body(self, handle, *args)

    def entry_body(self: FakeNvmlLib, handle: Any, *args: Any) -> int:
        self.board.calls += 1
        if not self.initialised:  # after the last nvmlShutdown, as a real driver answers
            return N.NVML_ERROR_UNINITIALIZED
        token = _token(handle)
        index, mig = divmod(token, DEVICE_TOKEN)
        index -= 1
        if not 0 <= index < len(self.board.devices):
            return N.NVML_ERROR_INVALID_ARGUMENT
        dev = self.board.devices[index]
        if mig and mig > len(dev.mig):
            return N.NVML_ERROR_INVALID_ARGUMENT
        self.board.now()
        failed = self._fault(symbol, index)
        if failed is not None:
            return failed
        return fn(self, dev, mig - 1 if mig else None, *args)

    entry.__name__ = symbol
    return entry


class FakeNvmlLib:
    """Entry points are looked up by name with ``getattr``: a symbol missing from ``exports()``
    raises AttributeError, which pynvml turns into NVMLError_FunctionNotFound."""

    def __init__(self, board: SimBoard) -> None:
        self.board = board
        self.initialised = 0
        self._gpm_ids = itertools.count(1)
        self._gpm_samples: dict[int, tuple[int, float, Counters] | None] = {}

    def exports(self) -> SimpleNamespace:
        """The library object pynvml sees: only the symbols this driver generation has."""
        return SimpleNamespace(
            **{name: getattr(self, name) for name in sorted(self.board.driver.symbols)}
        )

    # ---- plumbing -------------------------------------------------------------------------

    def _fault(self, symbol: str, device: int | None) -> int | None:
        f = self.board.fault_for(symbol, device)
        if f is None:
            return None
        if f.hang:
            self.board.wait_while_hung()
            return N.NVML_ERROR_TIMEOUT
        return f.code

    def _global(self, symbol: str) -> int | None:
        self.board.calls += 1
        if not self.initialised and symbol not in ("nvmlInitWithFlags", "nvmlInit_v2"):
            return N.NVML_ERROR_UNINITIALIZED
        return self._fault(symbol, None)

    # ---- library and system ---------------------------------------------------------------

    def nvmlInitWithFlags(self, flags: Any) -> int:
        failed = self._global("nvmlInitWithFlags")
        if failed is not None:
            return failed
        self.initialised += 1
        return N.NVML_SUCCESS

    def nvmlInit_v2(self) -> int:
        return self.nvmlInitWithFlags(0)

    def nvmlShutdown(self) -> int:
        failed = self._global("nvmlShutdown")
        if failed is not None:
            return failed
        self.initialised = max(0, self.initialised - 1)
        return N.NVML_SUCCESS

    def nvmlSystemGetDriverVersion(self, buf: Any, size: Any) -> int:
        failed = self._global("nvmlSystemGetDriverVersion")
        if failed is not None:
            return failed
        buf.value = self.board.driver.version.encode()
        return N.NVML_SUCCESS

    def nvmlSystemGetCudaDriverVersion(self, out: Any) -> int:
        failed = self._global("nvmlSystemGetCudaDriverVersion")
        if failed is not None:
            return failed
        _out(out).value = self.board.driver.cuda_version
        return N.NVML_SUCCESS

    def nvmlDeviceGetCount_v2(self, out: Any) -> int:
        failed = self._global("nvmlDeviceGetCount_v2")
        if failed is not None:
            return failed
        _out(out).value = len(self.board.devices)
        return N.NVML_SUCCESS

    def nvmlDeviceGetHandleByIndex_v2(self, index: Any, out: Any) -> int:
        i = _val(index)
        failed = self._global("nvmlDeviceGetHandleByIndex_v2") or self._fault(
            "nvmlDeviceGetHandleByIndex_v2", i
        )
        if failed is not None:
            return failed
        if not 0 <= i < len(self.board.devices):
            return N.NVML_ERROR_INVALID_ARGUMENT
        _set_pointer(_out(out), DEVICE_TOKEN * (i + 1))
        return N.NVML_SUCCESS

    def _handle_where(self, symbol: str, match: Callable[[SimDevice, int | None], bool]) -> Any:
        """The token of the first device or MIG instance ``match(dev, mig)`` accepts, or an
        NVML error code (as a negative number) when none does."""
        failed = self._global(symbol)
        if failed is not None:
            return -failed
        for i, dev in enumerate(self.board.devices):
            if match(dev, None):
                return DEVICE_TOKEN * (i + 1)
            for k in range(len(dev.mig)):
                if match(dev, k):
                    return DEVICE_TOKEN * (i + 1) + k + 1
        return -N.NVML_ERROR_NOT_FOUND

    def _set_handle(self, token: int, out: Any) -> int:
        if token < 0:
            return -token
        _set_pointer(_out(out), token)
        return N.NVML_SUCCESS

    def nvmlDeviceGetHandleByUUID(self, uuid: Any, out: Any) -> int:
        want = _text(uuid)
        token = self._handle_where(
            "nvmlDeviceGetHandleByUUID", lambda dev, mig: _uuid_of(dev, mig) == want
        )
        return self._set_handle(token, out)

    def nvmlDeviceGetHandleByPciBusId_v2(self, bus_id: Any, out: Any) -> int:
        want = _bus_key(_text(bus_id))
        if want is None:
            return N.NVML_ERROR_INVALID_ARGUMENT
        token = self._handle_where(
            "nvmlDeviceGetHandleByPciBusId_v2",
            lambda dev, mig: mig is None and _bus_key(dev.pci_bus_id) == want,
        )
        return self._set_handle(token, out)

    # ---- identity ---------------------------------------------------------------------------

    @_device_entry
    def nvmlDeviceGetIndex(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        if mig is not None:  # not documented for MIG handles; clients ask the parent
            return N.NVML_ERROR_NOT_SUPPORTED
        _out(out).value = dev.state.index
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetMinorNumber(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        if mig is not None:
            return N.NVML_ERROR_NOT_SUPPORTED
        _out(out).value = dev.state.index  # the captures: minor_number 0..7 in bus order
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetSerial(self, dev: SimDevice, mig: int | None, buf: Any, size: Any) -> int:
        if mig is not None:
            return N.NVML_ERROR_NOT_SUPPORTED
        serial = str(dev.state.board.serial_base + dev.state.index).encode()
        if len(serial) >= _val(size):
            return N.NVML_ERROR_INSUFFICIENT_SIZE
        buf.value = serial
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetCudaComputeCapability(
        self, dev: SimDevice, mig: int | None, major: Any, minor: Any
    ) -> int:
        _out(major).value, _out(minor).value = dev.state.board.cuda_capability
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetName(self, dev: SimDevice, mig: int | None, buf: Any, size: Any) -> int:
        name = dev.mig[mig].name if mig is not None else dev.state.board.name
        buf.value = name.encode()[: _val(size) - 1]
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetUUID(self, dev: SimDevice, mig: int | None, buf: Any, size: Any) -> int:
        buf.value = _uuid_of(dev, mig).encode()
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetPciInfo_v3(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        info = _out(out)
        bus = dev.pci_bus_id
        info.busId = bus.encode()
        info.busIdLegacy = bus[4:].encode()
        domain, b, rest = bus.split(":")
        info.domain = int(domain, 16)
        info.bus = int(b, 16)
        info.device = int(rest.split(".")[0], 16)
        info.pciDeviceId = dev.state.board.pci_device_id
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetArchitecture(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        _out(out).value = dev.state.board.nvml_arch
        return N.NVML_SUCCESS

    # ---- clocks, power, temperature ----------------------------------------------------------

    @_device_entry
    def nvmlDeviceGetClockInfo(self, dev: SimDevice, mig: int | None, kind: Any, out: Any) -> int:
        b, s = dev.state.board, dev.state
        clocks = {
            N.NVML_CLOCK_GRAPHICS: s.sm_clock,
            N.NVML_CLOCK_SM: s.sm_clock,
            N.NVML_CLOCK_MEM: b.idle_mem_clock if s.reasons & 0x1 else b.max_mem_clock,
            N.NVML_CLOCK_VIDEO: _video_clock(b, s.sm_clock),
        }
        k = _val(kind)
        if k not in clocks:
            return N.NVML_ERROR_INVALID_ARGUMENT
        _out(out).value = clocks[k]
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetMaxClockInfo(
        self, dev: SimDevice, mig: int | None, kind: Any, out: Any
    ) -> int:
        b = dev.state.board
        clocks = {
            N.NVML_CLOCK_GRAPHICS: b.max_sm_clock,
            N.NVML_CLOCK_SM: b.max_sm_clock,
            N.NVML_CLOCK_MEM: b.max_mem_clock,
            N.NVML_CLOCK_VIDEO: b.max_video_clock,
        }
        k = _val(kind)
        if k not in clocks:
            return N.NVML_ERROR_INVALID_ARGUMENT
        _out(out).value = clocks[k]
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetPowerUsage(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        if mig is not None:
            return N.NVML_ERROR_NOT_SUPPORTED
        s = dev.state
        watts = s.power_avg_w if s.board.power_is_averaged else s.power_w
        watts *= 1.0 + 0.004 * self.board.noise(s.index, 10)
        _out(out).value = int(min(watts, s.power_limit_w * 1.02) * 1000)
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetEnforcedPowerLimit(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        _out(out).value = int(dev.state.power_limit_w * 1000)
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetPowerManagementDefaultLimit(
        self, dev: SimDevice, mig: int | None, out: Any
    ) -> int:
        _out(out).value = int(dev.state.board.power_limit * 1000)
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetPowerManagementLimitConstraints(
        self, dev: SimDevice, mig: int | None, lo: Any, hi: Any
    ) -> int:
        _out(lo).value = int(dev.state.board.power_min * 1000)
        _out(hi).value = int(dev.state.board.power_max * 1000)
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetPowerManagementLimit(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        """The limit set (capture: current_power_limit); the board has no other limiter, so it
        equals the enforced one."""
        if mig is not None:
            return N.NVML_ERROR_NOT_SUPPORTED
        _out(out).value = int(dev.state.power_limit_w * 1000)
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetTotalEnergyConsumption(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        _out(out).value = int(dev.state.energy_mj)
        return N.NVML_SUCCESS

    def _temperature(self, dev: SimDevice, sensor: int) -> int | None:
        if sensor != N.NVML_TEMPERATURE_GPU:
            return None
        return round(dev.state.temp_c + 0.3 * self.board.noise(dev.state.index, 11))

    @_device_entry
    def nvmlDeviceGetTemperature(
        self, dev: SimDevice, mig: int | None, sensor: Any, out: Any
    ) -> int:
        t = self._temperature(dev, _val(sensor))
        if t is None:
            return N.NVML_ERROR_INVALID_ARGUMENT
        _out(out).value = t
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetTemperatureV(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        req = _out(out)
        if req.version != N.nvmlTemperature_v1:
            return N.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        t = self._temperature(dev, int(req.sensorType))
        if t is None:
            return N.NVML_ERROR_INVALID_ARGUMENT
        req.temperature = t
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetTemperatureThreshold(
        self, dev: SimDevice, mig: int | None, kind: Any, out: Any
    ) -> int:
        b = dev.state.board
        values = {
            N.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: b.temp_shutdown,
            N.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: b.temp_slowdown,
            N.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: b.temp_gpu_max,
            N.NVML_TEMPERATURE_THRESHOLD_MEM_MAX: b.temp_mem_max,
        }
        v = values.get(_val(kind))
        if v is None:
            return N.NVML_ERROR_NOT_SUPPORTED
        _out(out).value = v
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetCurrentClocksEventReasons(
        self, dev: SimDevice, mig: int | None, out: Any
    ) -> int:
        _out(out).value = dev.state.reasons
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetCurrentClocksThrottleReasons(
        self, dev: SimDevice, mig: int | None, out: Any
    ) -> int:
        _out(out).value = dev.state.reasons
        return N.NVML_SUCCESS

    # ---- modes and states (physical facts: NOT_SUPPORTED on a MIG handle) -------------------

    def _physical(self, mig: int | None, out: Any, value: int | None) -> int:
        """Write ``value`` (None: the board has no such thing, a real driver's NOT_SUPPORTED)."""
        if mig is not None or value is None:
            return N.NVML_ERROR_NOT_SUPPORTED
        _out(out).value = value
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetPersistenceMode(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        return self._physical(mig, out, int(dev.state.board.persistence_mode))

    @_device_entry
    def nvmlDeviceGetDisplayActive(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        return self._physical(mig, out, 0)  # every capture: display_active Disabled

    @_device_entry
    def nvmlDeviceGetDisplayMode(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        """A display can be attached (A100 capture, 570: display_mode Enabled; later captures
        say display_attached Yes and print display_mode as deprecated from 580 on)."""
        if branch(self.board.driver) >= DISPLAY_MODE_DEPRECATED_FROM:
            return N.NVML_ERROR_DEPRECATED
        return self._physical(mig, out, 1)

    @_device_entry
    def nvmlDeviceGetDriverModel(
        self, dev: SimDevice, mig: int | None, current: Any, pending: Any
    ) -> int:
        return N.NVML_ERROR_NOT_SUPPORTED  # Windows only (every capture: driver_model N/A)

    @_device_entry
    def nvmlDeviceGetPerformanceState(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        return self._physical(mig, out, 0)  # P0: persistence on, idle or busy (captures)

    @_device_entry
    def nvmlDeviceGetComputeMode(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        return self._physical(mig, out, N.NVML_COMPUTEMODE_DEFAULT)  # captures: Default

    @_device_entry
    def nvmlDeviceGetFanSpeed(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        return self._physical(mig, out, 0 if dev.state.board.has_fan else None)

    @_device_entry
    def nvmlDeviceGetEccMode(
        self, dev: SimDevice, mig: int | None, current: Any, pending: Any
    ) -> int:
        if mig is not None:
            return N.NVML_ERROR_NOT_SUPPORTED
        _out(current).value = _out(pending).value = 1  # captures: Enabled / Enabled
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetTotalEccErrors(
        self, dev: SimDevice, mig: int | None, error_type: Any, counter_type: Any, out: Any
    ) -> int:
        corrected = _val(error_type) == N.NVML_MEMORY_ERROR_TYPE_CORRECTED
        aggregate = _val(counter_type) == N.NVML_AGGREGATE_ECC
        count = dev.state.board.ecc_aggregate_corrected if corrected and aggregate else 0
        return self._physical(mig, out, count)

    @_device_entry
    def nvmlDeviceGetEncoderUtilization(
        self, dev: SimDevice, mig: int | None, util: Any, period: Any
    ) -> int:
        return self._codec(mig, util, period)

    @_device_entry
    def nvmlDeviceGetDecoderUtilization(
        self, dev: SimDevice, mig: int | None, util: Any, period: Any
    ) -> int:
        return self._codec(mig, util, period)

    def _codec(self, mig: int | None, util: Any, period: Any) -> int:
        """Training runs no video: 0 %, as every capture's encoder_util and decoder_util."""
        if mig is not None:
            return N.NVML_ERROR_NOT_SUPPORTED
        _out(util).value = 0
        _out(period).value = CODEC_SAMPLE_PERIOD_US
        return N.NVML_SUCCESS

    # ---- utilisation and memory --------------------------------------------------------------

    @_device_entry
    def nvmlDeviceGetUtilizationRates(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        if mig is not None or dev.mig:
            return N.NVML_ERROR_NOT_SUPPORTED
        duty, dram, i = dev.state.util_duty, dev.state.util_dram, dev.state.index
        u = _out(out)
        u.gpu = _pct(duty * 100 + (self.board.noise(i, 12) if duty > 0.005 else 0))
        u.memory = _pct(dram * 88 + (self.board.noise(i, 13) if dram > 0.005 else 0))
        return N.NVML_SUCCESS

    def _memory(self, dev: SimDevice, mig: int | None) -> tuple[int, int, int]:
        """(total, reserved, used) bytes for the device or one MIG instance."""
        b = dev.state.board
        procs = [p for p in dev.processes if mig is None or p.mig_index == mig]
        used = sum(p.used_mem_bytes for p in procs)
        if mig is not None:
            return dev.mig[mig].mem_total, 0, used
        return b.mem_total, b.mem_reserved, min(used + dev.base_used, b.mem_total - b.mem_reserved)

    @_device_entry
    def nvmlDeviceGetMemoryInfo(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        total, reserved, used = self._memory(dev, mig)
        m = _out(out)
        if branch(self.board.driver) < V1_COUNTS_RESERVED_FROM:
            # before R510 the reservation is hidden from v1 altogether: not in total, not used
            m.total, m.used = total - reserved, used
        else:
            # R510+ fold the reservation into v1's "used" (why v1 reads high there)
            m.total, m.used = total, used + reserved
        m.free = total - reserved - used
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetMemoryInfo_v2(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        m = _out(out)
        if m.version != N.nvmlMemory_v2:
            return N.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        total, reserved, used = self._memory(dev, mig)
        m.total, m.reserved, m.used = total, reserved, used
        m.free = total - reserved - used
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetBAR1MemoryInfo(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        """The capture's BAR1; a MIG instance gets the share of its memory slices (of 8)."""
        b = dev.state.board
        total, used = b.bar1_total_mib * MIB, b.bar1_used_mib * MIB
        if mig is not None:
            slices = max(1, round(dev.mig[mig].mem_total / b.mem_total * 8))
            total, used = total * slices // 8, 0
        m = _out(out)
        m.bar1Total, m.bar1Used, m.bar1Free = total, used, total - used
        return N.NVML_SUCCESS

    # ---- PCIe and NVLink ---------------------------------------------------------------------

    @_device_entry
    def nvmlDeviceGetPcieThroughput(
        self, dev: SimDevice, mig: int | None, counter: Any, out: Any
    ) -> int:
        b, a, i = dev.state.board, dev.state.activity, dev.state.index
        link = pcie_bytes_per_s(b.pcie_cur_gen, b.pcie_cur_width) / 1000
        c = _val(counter)
        if c == N.NVML_PCIE_UTIL_TX_BYTES:
            kbps = b.idle_pcie_tx_kbps + a.pcie_tx * link
        elif c == N.NVML_PCIE_UTIL_RX_BYTES:
            kbps = b.idle_pcie_rx_kbps + a.pcie_rx * link
        else:
            return N.NVML_ERROR_INVALID_ARGUMENT
        # a 20 ms window: noisy
        _out(out).value = max(0, int(kbps * (1.0 + 0.15 * self.board.noise(i, 14 + c))))
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetCurrPcieLinkGeneration(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        _out(out).value = dev.state.board.pcie_cur_gen
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetCurrPcieLinkWidth(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        _out(out).value = dev.state.board.pcie_cur_width
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetMaxPcieLinkGeneration(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        _out(out).value = dev.state.board.pcie_max_gen
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetMaxPcieLinkWidth(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        _out(out).value = dev.state.board.pcie_max_width
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetFieldValues(
        self, dev: SimDevice, mig: int | None, count: Any, values: Any
    ) -> int:
        arr = _out(values)
        b, s = dev.state.board, dev.state
        ts = self.board.epoch_us()
        for k in range(_val(count)):
            v = arr[k]
            v.timestamp = ts
            v.latencyUsec = 0
            links = b.nvlink_links
            if v.fieldId == N.NVML_FI_DEV_NVLINK_LINK_COUNT:
                v.valueType, v.nvmlReturn = N.NVML_VALUE_TYPE_UNSIGNED_INT, N.NVML_SUCCESS
                v.value.uiVal = links
            elif v.fieldId in (
                N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
                N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
            ):
                if not links or v.scopeId >= links:
                    v.nvmlReturn = N.NVML_ERROR_NOT_SUPPORTED
                    continue
                total = (
                    s.counters.nvlink_tx_bytes
                    if v.fieldId == N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
                    else s.counters.nvlink_rx_bytes
                )
                v.valueType, v.nvmlReturn = N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, N.NVML_SUCCESS
                v.value.ullVal = int(total / links / 1024)
            else:
                v.nvmlReturn = N.NVML_ERROR_NOT_SUPPORTED
        return N.NVML_SUCCESS

    # ---- processes -----------------------------------------------------------------------------

    def _running(self, dev: SimDevice, mig: int | None, count: Any, array: Any) -> int:
        procs = [p for p in dev.processes if mig is None or p.mig_index == mig]
        c = _out(count)
        if array is None or c.value < len(procs):
            c.value = len(procs)
            return N.NVML_ERROR_INSUFFICIENT_SIZE if procs else N.NVML_SUCCESS
        for k, p in enumerate(procs):
            array[k].pid = p.pid
            array[k].usedGpuMemory = p.used_mem_bytes
            gi = dev.mig[p.mig_index].gpu_instance_id if p.mig_index is not None else 0xFFFFFFFF
            array[k].gpuInstanceId = gi
            array[k].computeInstanceId = 0 if p.mig_index is not None else 0xFFFFFFFF
        c.value = len(procs)
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetComputeRunningProcesses_v3(
        self, dev: SimDevice, mig: int | None, count: Any, array: Any
    ) -> int:
        return self._running(dev, mig, count, array)

    @_device_entry
    def nvmlDeviceGetComputeRunningProcesses_v2(
        self, dev: SimDevice, mig: int | None, count: Any, array: Any
    ) -> int:
        return self._running(dev, mig, count, array)

    @_device_entry
    def nvmlDeviceGetGraphicsRunningProcesses_v3(
        self, dev: SimDevice, mig: int | None, count: Any, array: Any
    ) -> int:
        return self._no_graphics(count)

    @_device_entry
    def nvmlDeviceGetGraphicsRunningProcesses_v2(
        self, dev: SimDevice, mig: int | None, count: Any, array: Any
    ) -> int:
        return self._no_graphics(count)

    def _no_graphics(self, count: Any) -> int:
        """Training processes hold compute contexts only: no graphics process (as on the
        captured servers, which list no process at all)."""
        _out(count).value = 0
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetProcessUtilization(
        self, dev: SimDevice, mig: int | None, samples: Any, count: Any, since: Any
    ) -> int:
        if mig is not None or dev.mig:
            return N.NVML_ERROR_NOT_SUPPORTED
        a = dev.state.activity
        now_us = self.board.epoch_us()
        active = [p for p in dev.processes if p.sm_share > 0]
        if a.duty < 0.005 or not active or _val(since) >= now_us:
            return N.NVML_ERROR_NOT_FOUND
        c = _out(count)
        if samples is None or c.value < len(active):
            c.value = len(active)
            return N.NVML_ERROR_INSUFFICIENT_SIZE
        for k, p in enumerate(active):
            samples[k].pid = p.pid
            samples[k].timeStamp = now_us
            samples[k].smUtil = _pct(a.duty * 100 * p.sm_share)
            samples[k].memUtil = _pct(a.dram * 88 * p.sm_share)
            samples[k].encUtil = samples[k].decUtil = 0
        c.value = len(active)
        return N.NVML_SUCCESS

    # ---- MIG -----------------------------------------------------------------------------------

    @_device_entry
    def nvmlDeviceGetMigMode(
        self, dev: SimDevice, mig: int | None, current: Any, pending: Any
    ) -> int:
        if not dev.state.board.mig_capable:
            return N.NVML_ERROR_NOT_SUPPORTED
        _out(current).value = _out(pending).value = 1 if dev.mig else 0
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetMaxMigDeviceCount(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        _out(out).value = MAX_MIG_DEVICES if dev.state.board.mig_capable else 0
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetMigDeviceHandleByIndex(
        self, dev: SimDevice, mig: int | None, index: Any, out: Any
    ) -> int:
        k = _val(index)
        if not dev.mig:
            return N.NVML_ERROR_INVALID_ARGUMENT
        if k >= len(dev.mig):
            return N.NVML_ERROR_NOT_FOUND
        _set_pointer(_out(out), DEVICE_TOKEN * (dev.state.index + 1) + k + 1)
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
        self, dev: SimDevice, mig: int | None, out: Any
    ) -> int:
        if mig is None:
            return N.NVML_ERROR_INVALID_ARGUMENT
        _set_pointer(_out(out), DEVICE_TOKEN * (dev.state.index + 1))
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceIsMigDeviceHandle(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        _out(out).value = 1 if mig is not None else 0
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetGpuInstanceId(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        if mig is None:
            return N.NVML_ERROR_INVALID_ARGUMENT
        _out(out).value = dev.mig[mig].gpu_instance_id
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlDeviceGetComputeInstanceId(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        if mig is None:
            return N.NVML_ERROR_INVALID_ARGUMENT
        _out(out).value = dev.mig[mig].compute_instance_id
        return N.NVML_SUCCESS

    # ---- GPM -----------------------------------------------------------------------------------

    @_device_entry
    def nvmlGpmQueryDeviceSupport(self, dev: SimDevice, mig: int | None, out: Any) -> int:
        support = _out(out)
        if support.version != N.NVML_GPM_SUPPORT_VERSION:
            return N.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        support.isSupportedDevice = 1 if dev.state.board.gpm else 0
        return N.NVML_SUCCESS

    def nvmlGpmSampleAlloc(self, out: Any) -> int:
        failed = self._global("nvmlGpmSampleAlloc")
        if failed is not None:
            return failed
        token = GPM_TOKEN_BASE + next(self._gpm_ids)
        self._gpm_samples[token] = None
        _set_pointer(_out(out), token)
        return N.NVML_SUCCESS

    def nvmlGpmSampleFree(self, sample: Any) -> int:
        failed = self._global("nvmlGpmSampleFree")
        if failed is not None:
            return failed
        if self._gpm_samples.pop(_token(sample), "missing") == "missing":
            return N.NVML_ERROR_INVALID_ARGUMENT
        return N.NVML_SUCCESS

    @_device_entry
    def nvmlGpmSampleGet(self, dev: SimDevice, mig: int | None, sample: Any) -> int:
        token = _token(sample)
        if token not in self._gpm_samples:
            return N.NVML_ERROR_INVALID_ARGUMENT
        if not dev.state.board.gpm:
            return N.NVML_ERROR_NOT_SUPPORTED
        self._gpm_samples[token] = (dev.state.index, self.board.elapsed, dev.state.counters.copy())
        return N.NVML_SUCCESS

    def nvmlGpmMetricsGet(self, out: Any) -> int:
        failed = self._global("nvmlGpmMetricsGet")
        if failed is not None:
            return failed
        mg = _out(out)
        if mg.version != N.NVML_GPM_METRICS_GET_VERSION:
            return N.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        s1 = self._gpm_samples.get(_token(mg.sample1))
        s2 = self._gpm_samples.get(_token(mg.sample2))
        if s1 is None or s2 is None or s1[0] != s2[0]:
            return N.NVML_ERROR_INVALID_ARGUMENT
        failed = self._fault("nvmlGpmMetricsGet", s1[0])
        if failed is not None:
            return failed
        (_, t1, c1), (_, t2, c2) = sorted((s1, s2), key=lambda s: s[1])
        dt = t2 - t1
        if dt < 0.1:
            return N.NVML_ERROR_INVALID_ARGUMENT
        mib = 1024 * 1024
        values = {
            N.NVML_GPM_METRIC_GRAPHICS_UTIL: (c2.duty - c1.duty) / dt * 100,
            N.NVML_GPM_METRIC_SM_UTIL: (c2.sm - c1.sm) / dt * 100,
            N.NVML_GPM_METRIC_SM_OCCUPANCY: (c2.occupancy - c1.occupancy) / dt * 100,
            N.NVML_GPM_METRIC_ANY_TENSOR_UTIL: (c2.tensor - c1.tensor) / dt * 100,
            N.NVML_GPM_METRIC_DRAM_BW_UTIL: (c2.dram - c1.dram) / dt * 100,
            N.NVML_GPM_METRIC_PCIE_TX_PER_SEC: (c2.pcie_tx_bytes - c1.pcie_tx_bytes) / dt / mib,
            N.NVML_GPM_METRIC_PCIE_RX_PER_SEC: (c2.pcie_rx_bytes - c1.pcie_rx_bytes) / dt / mib,
            N.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: (c2.nvlink_tx_bytes - c1.nvlink_tx_bytes)
            / dt
            / mib,
            N.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: (c2.nvlink_rx_bytes - c1.nvlink_rx_bytes)
            / dt
            / mib,
        }
        for k in range(mg.numMetrics):
            m = mg.metrics[k]
            if m.metricId in values:
                m.value = values[m.metricId]
                m.nvmlReturn = N.NVML_SUCCESS
            else:
                m.nvmlReturn = N.NVML_ERROR_NOT_SUPPORTED
        return N.NVML_SUCCESS


def _video_clock(b: BoardProfile, sm_clock: int) -> int:
    """The video clock for an SM clock: the capture's idle value at the idle SM clock, rising
    linearly to the max at the max SM clock, and cut in proportion below idle (throttled)."""
    if sm_clock <= b.idle_sm_clock:
        return int(b.idle_video_clock * sm_clock / b.idle_sm_clock)
    frac = (sm_clock - b.idle_sm_clock) / (b.max_sm_clock - b.idle_sm_clock)
    return int(b.idle_video_clock + min(1.0, frac) * (b.max_video_clock - b.idle_video_clock))


def _text(arg: Any) -> str:
    """A ``char *`` argument (pynvml passes c_char_p) as text."""
    raw = arg.value if hasattr(arg, "value") else arg
    return (raw or b"").decode() if isinstance(raw, bytes) else str(raw or "")


def _uuid_of(dev: SimDevice, mig: int | None) -> str:
    return dev.uuid if mig is None else "MIG" + dev.uuid[3:-2] + f"{mig:02x}"


def _bus_key(bus_id: str) -> tuple[int, int, int, int] | None:
    """domain:bus:device.function as numbers, so 0000:53:00.0 and 00000000:53:00.0 match."""
    try:
        domain, bus, rest = bus_id.strip().split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        return None


def _pct(v: float) -> int:
    return round(min(100.0, max(0.0, v)))
