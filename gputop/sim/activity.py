"""How busy a simulated GPU is, and the physics that turns that into clocks, power and heat.

An ``Activity`` is what the workload does (how much of the time kernels run, how many SMs they
fill, how hard they drive the tensor cores, DRAM, PCIe and NVLink). ``DeviceState.step`` turns it
into what NVML would report: power rising with activity and clock, temperature rising toward a
steady state with a time constant, the SM clock cut when demanded power exceeds the enforced
limit (SW power cap) or the temperature passes the GPU's limits (thermal reasons), and idle
clocks with the GpuIdle reason when nothing runs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from gputop.sim.boards import BoardProfile

STEP_S = 0.1
"""Integration step. State at time t depends only on t, never on how often it was queried."""

REASON_GPU_IDLE = 0x1
REASON_SW_POWER_CAP = 0x4
REASON_HW_SLOWDOWN = 0x8
REASON_SW_THERMAL = 0x20
REASON_HW_THERMAL = 0x40

CLOCK_POWER_EXPONENT = 2.5
"""Dynamic power grows roughly with f * V^2, and voltage with frequency: P ~ f^2.5."""

IDLE_DUTY = 0.005
UTIL_WINDOW_S = 1.0
"""NVML's utilisation is a duty cycle over a sample period of 1/6 s to 1 s, not an instant."""


@dataclass(frozen=True)
class Activity:
    """Time-averaged load, each 0..1. ``sm`` cannot exceed ``duty`` (no SM is busy when no
    kernel runs); ``pcie_*`` and ``nvlink`` are fractions of the link's bandwidth."""

    duty: float = 0.0
    sm: float = 0.0
    occupancy: float = 0.0
    tensor: float = 0.0
    dram: float = 0.0
    pcie_rx: float = 0.0
    pcie_tx: float = 0.0
    nvlink: float = 0.0

    def clamped(self) -> Activity:
        c = lambda v: min(1.0, max(0.0, v))  # noqa: E731
        duty = c(self.duty)
        sm = min(c(self.sm), duty)
        return Activity(
            duty=duty,
            sm=sm,
            occupancy=min(c(self.occupancy), sm),
            tensor=min(c(self.tensor), sm),
            dram=c(self.dram),
            pcie_rx=c(self.pcie_rx),
            pcie_tx=c(self.pcie_tx),
            nvlink=c(self.nvlink),
        )

    @property
    def load(self) -> float:
        """Share of full-load dynamic power this activity draws at max clock."""
        return 0.12 * self.duty + 0.48 * self.sm + 0.25 * self.tensor + 0.15 * self.dram


IDLE = Activity()
FULL = Activity(duty=1.0, sm=1.0, occupancy=0.7, tensor=1.0, dram=1.0)

ActivityFn = Callable[[float, int], Activity]
"""(seconds since the board started, device index) -> Activity."""


def constant(activity: Activity) -> ActivityFn:
    return lambda _t, _i: activity


PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_bytes_per_s(gen: int, width: int) -> float:
    return PCIE_LANE_GBPS.get(gen, 1.0) * width * 1e9


@dataclass
class Counters:
    """Integrals over time, the raw material of GPM's two-sample metrics."""

    duty: float = 0.0
    sm: float = 0.0
    occupancy: float = 0.0
    tensor: float = 0.0
    dram: float = 0.0
    pcie_tx_bytes: float = 0.0
    pcie_rx_bytes: float = 0.0
    nvlink_tx_bytes: float = 0.0
    nvlink_rx_bytes: float = 0.0

    def copy(self) -> Counters:
        return Counters(**vars(self))


@dataclass
class DeviceState:
    """The evolving physical state of one simulated GPU."""

    board: BoardProfile
    index: int
    power_limit_w: float
    cooling: float = 1.0
    """Multiplies the thermal resistance: 2.0 is a clogged heatsink or a failed fan."""
    time: float = 0.0
    temp_c: float = 0.0
    power_w: float = 0.0
    power_avg_w: float = 0.0
    energy_mj: float = 0.0
    sm_clock: int = 0
    reasons: int = REASON_GPU_IDLE
    activity: Activity = IDLE
    counters: Counters = field(default_factory=Counters)
    recent: deque[tuple[float, float]] = field(
        default_factory=lambda: deque(maxlen=round(UTIL_WINDOW_S / STEP_S))
    )
    """(duty, dram) of the last steps: what NVML's utilisation averages over."""

    @property
    def util_duty(self) -> float:
        return sum(d for d, _ in self.recent) / len(self.recent) if self.recent else 0.0

    @property
    def util_dram(self) -> float:
        return sum(m for _, m in self.recent) / len(self.recent) if self.recent else 0.0

    def __post_init__(self) -> None:
        self.temp_c = self.board.idle_temp
        self.power_w = self.power_avg_w = self.board.idle_power
        self.sm_clock = self.board.idle_sm_clock

    def _clock_for(self, load: float) -> tuple[int, int, float]:
        """(SM clock, reason bits, power) for a busy GPU at this load and temperature."""
        b = self.board
        dynamic_full = b.full_load_power_frac * b.power_limit - b.idle_power
        demand = max(dynamic_full * load, 1e-9)
        reasons = 0
        clock = float(b.max_sm_clock)
        headroom = self.power_limit_w - b.idle_power
        if b.idle_power + demand > self.power_limit_w:
            ratio = max(headroom, 1.0) / demand
            clock = b.max_sm_clock * ratio ** (1.0 / CLOCK_POWER_EXPONENT)
            reasons |= REASON_SW_POWER_CAP
        if self.temp_c >= b.temp_slowdown:
            clock *= 0.5
            reasons |= REASON_HW_SLOWDOWN | REASON_HW_THERMAL
        elif self.temp_c > b.temp_gpu_max:
            clock *= max(0.6, 1.0 - 0.06 * (self.temp_c - b.temp_gpu_max))
            reasons |= REASON_SW_THERMAL
        stepped = int(clock // b.clock_step) * b.clock_step
        sm_clock = min(b.max_sm_clock, max(b.min_sm_clock, stepped))
        power = b.idle_power + demand * (sm_clock / b.max_sm_clock) ** CLOCK_POWER_EXPONENT
        return sm_clock, reasons, power

    def step(self, activity: Activity, dt: float = STEP_S) -> None:
        b = self.board
        a = activity.clamped()
        self.activity = a
        self.recent.append((a.duty, a.dram))
        if a.duty < IDLE_DUTY:
            self.sm_clock, self.reasons, power = b.idle_sm_clock, REASON_GPU_IDLE, b.idle_power
        else:
            self.sm_clock, self.reasons, power = self._clock_for(a.load)
        self.power_w = power
        self.power_avg_w += (power - self.power_avg_w) * min(1.0, dt / 1.0)
        target = b.idle_temp + b.thermal_resistance * self.cooling * (power - b.idle_power)
        self.temp_c += (target - self.temp_c) * min(1.0, dt / b.thermal_tau_s)
        self.energy_mj += power * dt * 1000.0
        c = self.counters
        link = pcie_bytes_per_s(b.pcie_cur_gen, b.pcie_cur_width)
        nvlink = b.nvlink_links * b.nvlink_link_gbps * 1e9
        c.duty += a.duty * dt
        c.sm += a.sm * dt
        c.occupancy += a.occupancy * dt
        c.tensor += a.tensor * dt
        c.dram += a.dram * dt
        c.pcie_tx_bytes += (b.idle_pcie_tx_kbps * 1000 + a.pcie_tx * link) * dt
        c.pcie_rx_bytes += (b.idle_pcie_rx_kbps * 1000 + a.pcie_rx * link) * dt
        c.nvlink_tx_bytes += a.nvlink * nvlink * dt
        c.nvlink_rx_bytes += a.nvlink * nvlink * dt
        self.time += dt
