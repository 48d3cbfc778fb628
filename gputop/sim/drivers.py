"""Driver generations as the set of NVML C symbols they export.

A symbol a generation lacks is simply absent from the fake library, so the real pynvml raises
``NVMLError_FunctionNotFound`` (or ``NVMLLibraryMismatchError`` for unversioned wrappers) exactly
as it does on an old driver. The cut-off versions are the first driver headers that contain each
symbol (docs/facts/nvml-signals.md, "Driver generations": memory v2 and processes v3 by 510,
GPM by 520, clock *event* reasons by 535, TemperatureV by 565).
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
            "r570",
            "570.148.08",
            12080,
            BASE_SYMBOLS | R510_SYMBOLS | GPM_SYMBOLS | R535_SYMBOLS | R565_SYMBOLS,
            "every symbol gputop uses (the A100 capture's driver)",
        ),
        DriverGeneration(
            "r580",
            "580.105.08",
            13000,
            BASE_SYMBOLS | R510_SYMBOLS | GPM_SYMBOLS | R535_SYMBOLS | R565_SYMBOLS,
            "every symbol gputop uses (the H100 capture's driver)",
        ),
        DriverGeneration(
            "r595",
            "595.91.07",
            13020,
            BASE_SYMBOLS | R510_SYMBOLS | GPM_SYMBOLS | R535_SYMBOLS | R565_SYMBOLS,
            "every symbol gputop uses (the L40S and T4 captures' driver)",
        ),
    )
}
CURRENT_DRIVER = "r580"
"""The driver of a board given no --driver when its profile names none: the H100 capture's."""


class UnknownDriver(SimConfigError):
    """The driver generation asked for is not simulated; the message lists those that are."""

    when = "a --sim-driver that is not simulated"


def get_driver(key: str) -> DriverGeneration:
    """The generation named ``r580`` (any case); UnknownDriver listing the simulated ones."""
    try:
        return DRIVERS[key.strip().lower()]
    except KeyError:
        known = ", ".join(f"{d.key} ({d.version})" for d in DRIVERS.values())
        raise UnknownDriver(f"unknown simulated driver {key!r}: use one of {known}") from None


def branch(driver: DriverGeneration) -> int:
    """The release branch, 580 for 580.105.08: what NVIDIA's support statements are written in."""
    return int(driver.version.split(".", 1)[0])


MIN_BRANCH: dict[str, int] = {
    "Turing": 410,
    "Ampere": 450,
    "Hopper": 520,
    "Ada Lovelace": 525,
}
"""The first driver branch that runs each simulated architecture (NVML_DEVICE_ARCH names).

Sources: Turing (T4) from R410, the first driver of CUDA 10.0, the toolkit that introduced sm_75;
Ampere (A100) from R450, the first data-center branch with A100 (R450 release notes, which list
HGX A100 VBIOSes); Hopper (H100) from R520: NVIDIA AI Enterprise 2.3's release notes add "Support
for the NVIDIA H100 GPU" with bare-metal driver 520.61.05, the branch of CUDA 11.8 (the first
toolkit with sm_90), and NVML's GPM calls, which exist for Hopper only, first appear in the 520.56
headers (docs/facts/nvml-signals.md, "Driver generations"); so R515, which shipped Hopper only
to early-access partners, is refused. Ada (L40S) from R525, the first data-center branch with
Ada boards (L4/L40; CUDA 12.0); the L40S itself shipped in 2023 under R535, which changes
nothing for the generations simulated here (r515 is refused either way).
"""


class UnsupportedDriver(SimConfigError):
    """A board on a driver that predates its architecture: no such machine ever existed."""

    when = "a --sim-driver older than the --sim-board's architecture"


def supported_drivers(architecture: str) -> list[DriverGeneration]:
    """The simulated generations that can run an architecture, oldest first."""
    floor = MIN_BRANCH.get(architecture, 0)
    return [d for d in DRIVERS.values() if branch(d) >= floor]


def check_supported(name: str, architecture: str, driver: DriverGeneration) -> None:
    """Refuse a board and driver combination that never existed, naming those that work."""
    floor = MIN_BRANCH.get(architecture, 0)
    if branch(driver) < floor:
        ok = ", ".join(d.key for d in supported_drivers(architecture))
        raise UnsupportedDriver(
            f"{name} ({architecture}) needs driver R{floor} or later, not {driver.key} "
            f"({driver.version}): use one of {ok}"
        )
