"""Driver generations as the set of NVML C symbols they export.

A symbol a generation lacks is simply absent from the fake library, so the real pynvml raises
``NVMLError_FunctionNotFound`` (or ``NVMLLibraryMismatchError`` for unversioned wrappers) exactly
as it does on an old driver. The cut-off versions are the first driver headers that contain each
symbol (research/nvml-signals.md: memory v2 and processes v3 by 510, GPM by 520, clock *event*
reasons by 535, TemperatureV by 565).
"""

from __future__ import annotations

from dataclasses import dataclass

from gputop.sim.boards import SimConfigError

BASE_SYMBOLS = frozenset(
    {
        "nvmlInitWithFlags",
        "nvmlInit_v2",
        "nvmlShutdown",
        "nvmlSystemGetDriverVersion",
        "nvmlSystemGetCudaDriverVersion",
        "nvmlDeviceGetCount_v2",
        "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetPciInfo_v3",
        "nvmlDeviceGetArchitecture",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetMaxClockInfo",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetPowerManagementDefaultLimit",
        "nvmlDeviceGetPowerManagementLimitConstraints",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetTemperatureThreshold",
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetPcieThroughput",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetCurrPcieLinkWidth",
        "nvmlDeviceGetMaxPcieLinkGeneration",
        "nvmlDeviceGetMaxPcieLinkWidth",
        "nvmlDeviceGetFieldValues",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetProcessUtilization",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetMaxMigDeviceCount",
        "nvmlDeviceGetMigDeviceHandleByIndex",
        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
        "nvmlDeviceIsMigDeviceHandle",
        "nvmlDeviceGetGpuInstanceId",
        "nvmlDeviceGetComputeInstanceId",
        # what nvitop and gpustat read besides (docs/sim-nvml.md): all in NVML long before r470
        "nvmlDeviceGetIndex",
        "nvmlDeviceGetMinorNumber",
        "nvmlDeviceGetSerial",
        "nvmlDeviceGetHandleByUUID",
        "nvmlDeviceGetHandleByPciBusId_v2",
        "nvmlDeviceGetBAR1MemoryInfo",
        "nvmlDeviceGetEncoderUtilization",
        "nvmlDeviceGetDecoderUtilization",
        "nvmlDeviceGetFanSpeed",
        "nvmlDeviceGetPowerManagementLimit",
        "nvmlDeviceGetPersistenceMode",
        "nvmlDeviceGetDisplayActive",
        "nvmlDeviceGetDisplayMode",
        "nvmlDeviceGetDriverModel",
        "nvmlDeviceGetPerformanceState",
        "nvmlDeviceGetComputeMode",
        "nvmlDeviceGetEccMode",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetCudaComputeCapability",
        "nvmlDeviceGetGraphicsRunningProcesses_v2",
    }
)
R510_SYMBOLS = frozenset(
    {
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
    }
)
GPM_SYMBOLS = frozenset(
    {
        "nvmlGpmQueryDeviceSupport",
        "nvmlGpmSampleAlloc",
        "nvmlGpmSampleGet",
        "nvmlGpmSampleFree",
        "nvmlGpmMetricsGet",
    }
)
R535_SYMBOLS = frozenset({"nvmlDeviceGetCurrentClocksEventReasons"})
R565_SYMBOLS = frozenset({"nvmlDeviceGetTemperatureV"})


@dataclass(frozen=True)
class DriverGeneration:
    """A driver release as its NVML symbols, so the fake library lacks what that driver lacks."""

    key: str
    version: str
    cuda_version: int
    """As nvmlSystemGetCudaDriverVersion returns it: 1000 * major + 10 * minor."""
    symbols: frozenset[str]
    summary: str


DRIVERS: dict[str, DriverGeneration] = {
    d.key: d
    for d in (
        DriverGeneration(
            "r470",
            "470.256.02",
            11040,
            BASE_SYMBOLS,
            "no clock-event reasons, no processes v3, no memory v2, no GPM, no TemperatureV",
        ),
        DriverGeneration(
            "r515",
            "515.105.01",
            11070,
            BASE_SYMBOLS | R510_SYMBOLS,
            "memory v2 and processes v3; no GPM, no clock-event reasons, no TemperatureV",
        ),
        DriverGeneration(
            "r535",
            "535.216.01",
            12020,
            BASE_SYMBOLS | R510_SYMBOLS | GPM_SYMBOLS | R535_SYMBOLS,
            "GPM and clock-event reasons; no TemperatureV",
        ),
        DriverGeneration(
            "r580",
            "580.105.08",
            13000,
            BASE_SYMBOLS | R510_SYMBOLS | GPM_SYMBOLS | R535_SYMBOLS | R565_SYMBOLS,
            "current: every symbol gputop uses",
        ),
    )
}
CURRENT_DRIVER = "r580"


class UnknownDriver(SimConfigError):
    """The driver generation asked for is not simulated; the message lists those that are."""


def get_driver(key: str) -> DriverGeneration:
    try:
        return DRIVERS[key.strip().lower()]
    except KeyError:
        known = ", ".join(f"{d.key} ({d.version})" for d in DRIVERS.values())
        raise UnknownDriver(f"unknown simulated driver {key!r}: use one of {known}") from None
