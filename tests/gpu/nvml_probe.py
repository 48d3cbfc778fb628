"""One reading of every NVML entry point the simulated board fakes, through the real pynvml.

Each call's value (made JSON: structs as dicts, bytes as text) or the error it returned, keyed by
a label (the symbol, and the argument where one symbol is read several ways). On a real GPU this
is what the driver says; over ``gputop.sim`` it is what the board models, read the same way, so
the two can be held against each other (``nvml_compare``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import pynvml as N

from gputop.sources.nvml import GPM_METRICS

Call = Callable[[Any], Any]


def jsonable(value: Any, depth: int = 0) -> Any:
    """A pynvml result as plain JSON: structs and unions as dicts, arrays as lists."""
    if depth > 4:
        return repr(value)[:80]
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, ctypes.Array)):
        return [jsonable(v, depth + 1) for v in list(value)[:32]]
    if isinstance(value, (ctypes.Structure, ctypes.Union)):
        return {
            name: jsonable(getattr(value, name), depth + 1)
            for name, *_ in value._fields_
            if not name.startswith("_")
        }
    if hasattr(value, "value"):
        return jsonable(value.value, depth + 1)
    return repr(value)[:80]


def error_name(e: BaseException) -> str:
    """NVMLError_NotSupported, NVMLError_FunctionNotFound, ...: the class says it all."""
    return type(e).__name__


def _raw(symbol: str, *ctypes_args: Any) -> int:
    """Call an entry point pynvml wraps under another version (or not at all)."""
    fn = N._nvmlGetFunctionPointer(symbol)
    N._nvmlCheckReturn(fn(*ctypes_args))
    return 0


def _driver_model_v1(h: Any) -> list[int]:
    current, pending = ctypes.c_uint(), ctypes.c_uint()
    _raw("nvmlDeviceGetDriverModel", h, ctypes.byref(current), ctypes.byref(pending))
    return [current.value, pending.value]


def _field_values(h: Any) -> dict[str, Any]:
    ids = [
        (N.NVML_FI_DEV_NVLINK_LINK_COUNT, 0),
        (N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0),
        (N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 0),
    ]
    out = {}
    for (fid, _), v in zip(ids, N.nvmlDeviceGetFieldValues(h, [i for i, _ in ids]), strict=True):
        if v.nvmlReturn != N.NVML_SUCCESS:
            out[str(fid)] = {"error": error_name(N.NVMLError(v.nvmlReturn))}
        else:
            kind = {
                N.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
                N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
            }.get(v.valueType, "ullVal")
            out[str(fid)] = {"value": getattr(v.value, kind)}
    return out


def _processes(rows: Any) -> list[dict[str, Any]]:
    return [{"pid": p.pid, "used_mib": (p.usedGpuMemory or 0) >> 20} for p in rows][:16]


def _process_util(h: Any) -> list[dict[str, Any]]:
    return [
        {"pid": s.pid, "sm": s.smUtil, "mem": s.memUtil}
        for s in N.nvmlDeviceGetProcessUtilization(h, 0)
    ][:16]


def _w(name: str) -> Call:
    """pynvml's wrapper ``name``, looked up when called: an older nvidia-ml-py without it gives
    that call an error, not the probe an ImportError."""
    return lambda h: getattr(N, name)(h)


# (label, call on a device handle). Labels are the C symbol the call reaches, with the argument
# after a colon where one symbol is read several ways.
DEVICE_CALLS: tuple[tuple[str, Call], ...] = (
    ("nvmlDeviceGetIndex", _w("nvmlDeviceGetIndex")),
    ("nvmlDeviceGetMinorNumber", _w("nvmlDeviceGetMinorNumber")),
    ("nvmlDeviceGetSerial", _w("nvmlDeviceGetSerial")),
    ("nvmlDeviceGetName", _w("nvmlDeviceGetName")),
    ("nvmlDeviceGetUUID", _w("nvmlDeviceGetUUID")),
    (
        "nvmlDeviceGetPciInfo_v3",
        lambda h: {
            "busId": N.nvmlDeviceGetPciInfo(h).busId,
            "pciDeviceId": N.nvmlDeviceGetPciInfo(h).pciDeviceId,
        },
    ),
    ("nvmlDeviceGetArchitecture", _w("nvmlDeviceGetArchitecture")),
    ("nvmlDeviceGetCudaComputeCapability", _w("nvmlDeviceGetCudaComputeCapability")),
    ("nvmlDeviceGetClockInfo:SM", lambda h: N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM)),
    (
        "nvmlDeviceGetClockInfo:GRAPHICS",
        lambda h: N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_GRAPHICS),
    ),
    ("nvmlDeviceGetClockInfo:MEM", lambda h: N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_MEM)),
    ("nvmlDeviceGetClockInfo:VIDEO", lambda h: N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_VIDEO)),
    ("nvmlDeviceGetMaxClockInfo:SM", lambda h: N.nvmlDeviceGetMaxClockInfo(h, N.NVML_CLOCK_SM)),
    ("nvmlDeviceGetMaxClockInfo:MEM", lambda h: N.nvmlDeviceGetMaxClockInfo(h, N.NVML_CLOCK_MEM)),
    (
        "nvmlDeviceGetMaxClockInfo:VIDEO",
        lambda h: N.nvmlDeviceGetMaxClockInfo(h, N.NVML_CLOCK_VIDEO),
    ),
    ("nvmlDeviceGetPowerUsage", _w("nvmlDeviceGetPowerUsage")),
    ("nvmlDeviceGetEnforcedPowerLimit", _w("nvmlDeviceGetEnforcedPowerLimit")),
    ("nvmlDeviceGetPowerManagementDefaultLimit", _w("nvmlDeviceGetPowerManagementDefaultLimit")),
    (
        "nvmlDeviceGetPowerManagementLimitConstraints",
        _w("nvmlDeviceGetPowerManagementLimitConstraints"),
    ),
    ("nvmlDeviceGetPowerManagementLimit", _w("nvmlDeviceGetPowerManagementLimit")),
    ("nvmlDeviceGetTotalEnergyConsumption", _w("nvmlDeviceGetTotalEnergyConsumption")),
    ("nvmlDeviceGetTemperature", lambda h: N.nvmlDeviceGetTemperature(h, N.NVML_TEMPERATURE_GPU)),
    ("nvmlDeviceGetTemperatureV", lambda h: N.nvmlDeviceGetTemperatureV(h, N.NVML_TEMPERATURE_GPU)),
    (
        "nvmlDeviceGetTemperatureThreshold:SLOWDOWN",
        lambda h: N.nvmlDeviceGetTemperatureThreshold(h, N.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
    ),
    (
        "nvmlDeviceGetTemperatureThreshold:SHUTDOWN",
        lambda h: N.nvmlDeviceGetTemperatureThreshold(h, N.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
    ),
    (
        "nvmlDeviceGetTemperatureThreshold:GPU_MAX",
        lambda h: N.nvmlDeviceGetTemperatureThreshold(h, N.NVML_TEMPERATURE_THRESHOLD_GPU_MAX),
    ),
    (
        "nvmlDeviceGetTemperatureThreshold:MEM_MAX",
        lambda h: N.nvmlDeviceGetTemperatureThreshold(h, N.NVML_TEMPERATURE_THRESHOLD_MEM_MAX),
    ),
    ("nvmlDeviceGetCurrentClocksEventReasons", _w("nvmlDeviceGetCurrentClocksEventReasons")),
    ("nvmlDeviceGetCurrentClocksThrottleReasons", _w("nvmlDeviceGetCurrentClocksThrottleReasons")),
    ("nvmlDeviceGetPersistenceMode", _w("nvmlDeviceGetPersistenceMode")),
    ("nvmlDeviceGetDisplayActive", _w("nvmlDeviceGetDisplayActive")),
    ("nvmlDeviceGetDisplayMode", _w("nvmlDeviceGetDisplayMode")),
    # pynvml 13's wrapper calls _v2, which the board does not export: read both
    ("nvmlDeviceGetDriverModel:wrapper", _w("nvmlDeviceGetDriverModel")),
    ("nvmlDeviceGetDriverModel", _driver_model_v1),
    ("nvmlDeviceGetPerformanceState", _w("nvmlDeviceGetPerformanceState")),
    ("nvmlDeviceGetComputeMode", _w("nvmlDeviceGetComputeMode")),
    ("nvmlDeviceGetFanSpeed", _w("nvmlDeviceGetFanSpeed")),
    ("nvmlDeviceGetEccMode", _w("nvmlDeviceGetEccMode")),
    (
        "nvmlDeviceGetTotalEccErrors",
        lambda h: N.nvmlDeviceGetTotalEccErrors(
            h, N.NVML_MEMORY_ERROR_TYPE_CORRECTED, N.NVML_AGGREGATE_ECC
        ),
    ),
    ("nvmlDeviceGetEncoderUtilization", _w("nvmlDeviceGetEncoderUtilization")),
    ("nvmlDeviceGetDecoderUtilization", _w("nvmlDeviceGetDecoderUtilization")),
    ("nvmlDeviceGetUtilizationRates", _w("nvmlDeviceGetUtilizationRates")),
    ("nvmlDeviceGetMemoryInfo", _w("nvmlDeviceGetMemoryInfo")),
    ("nvmlDeviceGetMemoryInfo_v2", lambda h: N.nvmlDeviceGetMemoryInfo(h, N.nvmlMemory_v2)),
    ("nvmlDeviceGetBAR1MemoryInfo", _w("nvmlDeviceGetBAR1MemoryInfo")),
    (
        "nvmlDeviceGetPcieThroughput:TX",
        lambda h: N.nvmlDeviceGetPcieThroughput(h, N.NVML_PCIE_UTIL_TX_BYTES),
    ),
    (
        "nvmlDeviceGetPcieThroughput:RX",
        lambda h: N.nvmlDeviceGetPcieThroughput(h, N.NVML_PCIE_UTIL_RX_BYTES),
    ),
    ("nvmlDeviceGetCurrPcieLinkGeneration", _w("nvmlDeviceGetCurrPcieLinkGeneration")),
    ("nvmlDeviceGetCurrPcieLinkWidth", _w("nvmlDeviceGetCurrPcieLinkWidth")),
    ("nvmlDeviceGetMaxPcieLinkGeneration", _w("nvmlDeviceGetMaxPcieLinkGeneration")),
    ("nvmlDeviceGetMaxPcieLinkWidth", _w("nvmlDeviceGetMaxPcieLinkWidth")),
    ("nvmlDeviceGetFieldValues", _field_values),
    (
        "nvmlDeviceGetComputeRunningProcesses_v3",
        lambda h: _processes(N.nvmlDeviceGetComputeRunningProcesses_v3(h)),
    ),
    (
        "nvmlDeviceGetComputeRunningProcesses_v2",
        lambda h: _processes(N.nvmlDeviceGetComputeRunningProcesses_v2(h)),
    ),
    (
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        lambda h: _processes(N.nvmlDeviceGetGraphicsRunningProcesses_v3(h)),
    ),
    (
        "nvmlDeviceGetGraphicsRunningProcesses_v2",
        lambda h: _processes(N.nvmlDeviceGetGraphicsRunningProcesses_v2(h)),
    ),
    ("nvmlDeviceGetProcessUtilization", _process_util),
    ("nvmlDeviceGetMigMode", _w("nvmlDeviceGetMigMode")),
    ("nvmlDeviceGetMaxMigDeviceCount", _w("nvmlDeviceGetMaxMigDeviceCount")),
    ("nvmlDeviceIsMigDeviceHandle", _w("nvmlDeviceIsMigDeviceHandle")),
    ("nvmlDeviceGetGpuInstanceId", _w("nvmlDeviceGetGpuInstanceId")),
    ("nvmlDeviceGetComputeInstanceId", _w("nvmlDeviceGetComputeInstanceId")),
    (
        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
        lambda h: bool(N.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h)),
    ),
    (
        "nvmlDeviceGetMigDeviceHandleByIndex",
        lambda h: bool(N.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)),
    ),
    ("nvmlGpmQueryDeviceSupport", lambda h: N.nvmlGpmQueryDeviceSupport(h).isSupportedDevice),
)
MIG_CALLS = (
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetComputeRunningProcesses_v3",
)
"""What is read again on the first MIG instance, when the device has one."""


def attempt(call: Call, *args: Any) -> dict[str, Any]:
    """``{"value": ...}`` or ``{"error": "NVMLError_..."}``: never raises."""
    try:
        return {"value": jsonable(call(*args))}
    except Exception as e:  # a binding or driver failure is a result here, not a crash
        return {"error": error_name(e)}


def system_calls() -> dict[str, dict[str, Any]]:
    """The calls that take no device handle (nvmlInit is already done)."""
    calls: dict[str, dict[str, Any]] = {
        "nvmlSystemGetDriverVersion": attempt(N.nvmlSystemGetDriverVersion),
        "nvmlSystemGetCudaDriverVersion": attempt(N.nvmlSystemGetCudaDriverVersion),
        "nvmlDeviceGetCount_v2": attempt(N.nvmlDeviceGetCount),
        "nvmlInit_v2": attempt(lambda: _raw("nvmlInit_v2")),
    }
    attempt(lambda: _raw("nvmlShutdown"))  # the nvmlInit_v2 above took a reference of its own
    return calls


def device_calls(index: int = 0) -> dict[str, dict[str, Any]]:
    """Every device call on device ``index``, then the handle lookups and its first MIG
    instance's calls (``mig:`` labels) when it has one."""
    h = N.nvmlDeviceGetHandleByIndex(index)
    calls = {label: attempt(call, h) for label, call in DEVICE_CALLS}
    uuid = calls["nvmlDeviceGetUUID"].get("value")
    bus = (calls["nvmlDeviceGetPciInfo_v3"].get("value") or {}).get("busId")
    calls["nvmlDeviceGetHandleByUUID"] = attempt(
        lambda: N.nvmlDeviceGetIndex(N.nvmlDeviceGetHandleByUUID(uuid or ""))
    )
    calls["nvmlDeviceGetHandleByPciBusId_v2"] = attempt(
        lambda: N.nvmlDeviceGetIndex(N.nvmlDeviceGetHandleByPciBusId(bus or ""))
    )
    try:
        mh = N.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)
    except N.NVMLError:
        return calls
    by_label = dict(DEVICE_CALLS)
    for label in MIG_CALLS:
        calls[f"mig:{label}"] = attempt(by_label[label], mh)
    return calls


class GpmReader:
    """GPM's two-sample protocol: a sample each reading, the metrics between the last two. On a
    board without GPM every call is still made once, so what it answers is recorded."""

    def __init__(self, index: int = 0) -> None:
        self.handle = N.nvmlDeviceGetHandleByIndex(index)
        self.samples: list[Any] = []
        self.problem: str | None = None
        try:
            self.samples = [N.nvmlGpmSampleAlloc(), N.nvmlGpmSampleAlloc()]
        except Exception as e:
            self.problem = error_name(e)
        self.taken = 0

    def read(self) -> dict[str, Any]:
        """Each metric's value (%, MiB/s) or error; ``{"error": ...}`` before two samples or
        when GPM cannot be used at all."""
        if self.problem:
            return {"error": self.problem}
        cur = self.samples[self.taken % 2]
        try:
            N.nvmlGpmSampleGet(self.handle, cur)
        except Exception as e:
            return {"error": error_name(e), "metrics_get": self._metrics()}
        self.taken += 1
        if self.taken < 2:
            return {"error": "first sample"}
        return self._metrics()

    def _metrics(self) -> Any:
        mg = N.c_nvmlGpmMetricsGet_t()
        mg.version = N.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(GPM_METRICS)
        mg.sample1 = self.samples[(self.taken + 1) % 2]
        mg.sample2 = self.samples[self.taken % 2]
        for k, metric_id in enumerate(GPM_METRICS.values()):
            mg.metrics[k].metricId = metric_id
        try:
            N.nvmlGpmMetricsGet(mg)
        except Exception as e:
            return {"error": error_name(e)}
        out: dict[str, Any] = {}
        for k, name in enumerate(GPM_METRICS):
            m = mg.metrics[k]
            ok = m.nvmlReturn == N.NVML_SUCCESS
            out[name] = round(float(m.value), 3) if ok else error_name(N.NVMLError(m.nvmlReturn))
        return out

    def close(self) -> None:
        for s in self.samples:
            attempt(N.nvmlGpmSampleFree, s)
