"""A simulated multi-GPU board: devices with physical state, a clock, processes and faults.

The board is advanced lazily to the clock's time whenever the fake NVML library is called, in
fixed steps, so what it reports at time t is deterministic for a seed whatever the query pattern.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gputop.sim.activity import STEP_S, DeviceState
from gputop.sim.boards import MIB, BoardSpec, parse_board
from gputop.sim.drivers import DriverGeneration, check_supported, get_driver
from gputop.sim.scenarios import Scenario, get_scenario

MAX_CATCH_UP_S = 3600.0
"""A clock jump longer than this is not integrated step by step (the state settles anyway)."""


def noise(seed: int, *keys: int) -> float:
    """Deterministic noise in [-1, 1) from integers (splitmix64), independent of call order."""
    x = seed & 0xFFFFFFFFFFFFFFFF
    for k in keys:
        x = (x ^ (k & 0xFFFFFFFFFFFFFFFF)) + 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 27)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
    return (x / 2**63) - 1.0


@dataclass
class SimProcess:
    """A process the simulated GPU runs: NVML reports ``pid`` (a host PID)."""

    pid: int
    used_mem_bytes: int
    sm_share: float = 1.0
    mig_index: int | None = None


@dataclass(frozen=True)
class Fault:
    """Make ``symbol`` (or every symbol when None) fail on ``device`` (or all) in [start, end).

    ``code`` is an NVML_ERROR_* value; ``hang`` instead blocks the call until the board's
    ``release_hangs()`` is called, as a wedged driver does.
    """

    code: int = 0
    symbol: str | None = None
    device: int | None = None
    start: float = 0.0
    end: float | None = None
    hang: bool = False

    def applies(self, symbol: str, device: int | None, t: float) -> bool:
        return (
            (self.symbol is None or self.symbol == symbol)
            and (self.device is None or self.device == device)
            and self.start <= t
            and (self.end is None or t < self.end)
        )


@dataclass
class MigInstance:
    """One instance a simulated device is split into, as the fake NVML's MIG calls report it."""

    name: str
    mem_total: int
    gpu_instance_id: int
    compute_instance_id: int = 0


@dataclass
class SimDevice:
    """One simulated GPU: its physical state, and the identity and processes NVML reports for it."""

    state: DeviceState
    uuid: str
    pci_bus_id: str
    mig: list[MigInstance] = field(default_factory=list)
    processes: list[SimProcess] = field(default_factory=list)
    base_used: int = 0
    """Memory in use that no listed process owns (the scenario's model, caches, contexts)."""


class SimBoard:
    """Everything the fake NVML library reports, as plain Python state."""

    def __init__(
        self,
        spec: BoardSpec | str = "h100",
        driver: DriverGeneration | str | None = None,
        scenario: Scenario | str = "idle",
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
        warmup_s: float = 0.0,
    ) -> None:
        """``warmup_s``: start as if the board had already run the scenario that long
        (temperatures settled), capped at an hour. ``driver``: None runs the board's capture's
        driver; a driver that predates the board's architecture is refused (UnsupportedDriver)."""
        self.spec = parse_board(spec) if isinstance(spec, str) else spec
        p = self.spec.profile
        driver = p.default_driver if driver is None else driver
        self.driver = get_driver(driver) if isinstance(driver, str) else driver
        check_supported(p.name, p.architecture, self.driver)
        self.scenario = get_scenario(scenario) if isinstance(scenario, str) else scenario
        self.seed = seed
        self._clock = clock
        self._t0 = clock() - min(warmup_s, MAX_CATCH_UP_S)
        self._wall0 = time.time() - (clock() - self._t0)
        """Unix time at board time 0: NVML's timestamps are epoch microseconds."""
        self._steps = 0
        self._lock = threading.RLock()
        self._release = threading.Event()
        self.faults: list[Fault] = []
        self.calls = 0
        self.measure_cpu = False
        """When set, ``sim_cpu_s`` accumulates the thread CPU time spent inside the fake
        library's device entry points (so benchmarks can subtract the simulator's share)."""
        self.sim_cpu_s = 0.0
        self.devices: list[SimDevice] = []
        for i in range(self.spec.count):
            own = self.scenario.for_device(i)
            state = DeviceState(
                board=p,
                index=i,
                power_limit_w=p.power_limit * own.power_limit_frac,
                cooling=own.cooling,
            )
            bus = p.pci_bus_ids[i] if i < len(p.pci_bus_ids) else _synth_bus_id(i)
            dev = SimDevice(state=state, uuid=_uuid(seed, i), pci_bus_id=bus)
            dev.base_used = int(own.mem_used_frac * (p.mem_total - p.mem_reserved))
            if self.spec.mig:
                dev.mig = [
                    MigInstance(name=f"{p.name} MIG {name}", mem_total=mib * MIB, gpu_instance_id=k)
                    for k, (name, mib) in enumerate(p.mig_profiles, start=1)
                ]
            self.devices.append(dev)

    @property
    def short_label(self) -> str:
        """What the SIMULATED banner says: board, count and workload."""
        name = self.spec.profile.name.removeprefix("NVIDIA ")
        mig = " MIG" if self.spec.mig else ""
        return f"{self.spec.count}x {name}{mig}, {self.scenario.key} workload"

    @property
    def elapsed(self) -> float:
        """Simulated seconds since the board was created."""
        return self._steps * STEP_S

    def epoch_us(self) -> int:
        """The board's time as NVML stamps samples and field values: Unix epoch microseconds
        (clients ask for process samples "since one second ago" in wall time)."""
        return int((self._wall0 + self.elapsed) * 1e6)

    def now(self) -> float:
        """Advance every device to the clock's time and return the board time."""
        with self._lock:
            target = int((self._clock() - self._t0) / STEP_S)
            if target - self._steps > MAX_CATCH_UP_S / STEP_S:
                self._steps = target - int(MAX_CATCH_UP_S / STEP_S)
            while self._steps < target:
                t = self._steps * STEP_S
                for d in self.devices:
                    d.state.step(self.scenario.activity(t, d.state.index))
                self._steps += 1
            return self.elapsed

    def fault_for(self, symbol: str, device: int | None) -> Fault | None:
        t = self.elapsed
        for f in self.faults:
            if f.applies(symbol, device, t):
                return f
        return None

    def wait_while_hung(self, timeout: float | None = None) -> None:
        self._release.wait(timeout)

    def release_hangs(self) -> None:
        self._release.set()

    def set_power_limit(self, device: int, watts: float) -> None:
        with self._lock:
            self.devices[device].state.power_limit_w = watts

    def noise(self, device: int, channel: int) -> float:
        return noise(self.seed, device, channel, self._steps)


def _uuid(seed: int, i: int) -> str:
    a = int((noise(seed, i, 1) + 1) * 2**31) & 0xFFFFFFFF
    b = int((noise(seed, i, 2) + 1) * 2**31) & 0xFFFFFFFF
    c = int((noise(seed, i, 3) + 1) * 2**31) & 0xFFFFFFFF
    return f"GPU-{a:08x}-{b >> 16:04x}-{b & 0xFFFF:04x}-{c >> 16:04x}-{c & 0xFFFF:04x}{i:08x}"


def _synth_bus_id(i: int) -> str:
    return f"00000000:{0x10 + i:02X}:00.0"
