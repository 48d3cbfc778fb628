"""NVML's clock-event (formerly "throttle") reason bits, decoded to names a person can read:
the names the GPU samples carry, the rules group and the panes, report and exporter show.

The bit values are the same in NVML's ClocksEventReason and ClocksThrottleReason families.
Bits this table does not know (pynvml's BoardLimit 0x200 and Reliability 0x400 are not in
nvml.h 13.3) are kept as hex strings so nothing the driver says is thrown away.
"""

from __future__ import annotations

REASON_BITS: tuple[tuple[int, str, str], ...] = (
    (0x1, "gpu_idle", "nothing is running; clocks are dropping to idle"),
    (0x2, "applications_clocks", "held by the application-clocks setting"),
    (0x4, "sw_power_cap", "clocks cut to stay under the power limit"),
    (0x8, "hw_slowdown", "hardware slowdown (temperature or power brake): clocks halved or worse"),
    (0x10, "sync_boost", "held to the slowest GPU of a sync-boost group"),
    (0x20, "sw_thermal", "clocks cut to keep the GPU or memory below its max temperature"),
    (0x40, "hw_thermal", "hardware thermal slowdown: clocks halved or worse"),
    (0x80, "hw_power_brake", "external power brake (power supply) asserted"),
    (0x100, "display_clocks", "held by the display clock setting"),
)
REASON_TEXT = {name: text for _, name, text in REASON_BITS}
THROTTLING = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake", "sync_boost"}
)
"""Reasons that mean the GPU runs slower than it could while busy (gpu_idle does not)."""
POWER_REASONS = frozenset({"sw_power_cap", "hw_power_brake"})
"""Reasons that say the power limit (or the supply) holds the clock down."""
THERMAL_REASONS = frozenset({"sw_thermal", "hw_thermal", "hw_slowdown"})
"""Reasons that say heat holds the clock down."""


def decode_reasons(mask: int) -> tuple[str, ...]:
    """Names of the set bits, in bit order; unknown bits as ``0x...`` strings."""
    names = [name for bit, name, _ in REASON_BITS if mask & bit]
    known = 0
    for bit, _, _ in REASON_BITS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"0x{bit:x}")
            rest &= ~bit
        bit <<= 1
    return tuple(names)
