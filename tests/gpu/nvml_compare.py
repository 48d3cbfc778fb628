"""Hold a board's NVML readings (``nvml_phases``) against the simulated board's twin: pure.

Three checks, each a list of one-line disagreements:

- calls: which calls fail, idle (and which GPM metrics);
- units and sizes: each quantity real over simulated within ``DYNAMIC_RATIO`` (a reading that
  moves), ``STATIC_RATIO`` for the same product's static facts (a W/mW slip is 1000x, a PCIe
  H100's max clock 1.13x);
- relations the rules rely on, each with the rule's own threshold: a relation the real board
  breaks is a disagreement, and so is one it shows that the twin does not (or the reverse).
"""

from __future__ import annotations

from statistics import mean
from typing import Any

from gputop.diagnose.rules.gpu import DRAM_BUSY, TENSOR_LOW
from gputop.diagnose.thresholds import IDLE_UTIL, LAUNCH_UTIL, TINY_KERNELS
from gputop.sim.activity import REASON_SW_POWER_CAP
from gputop.sim.boards import BOARDS
from gputop.sim.drivers import DRIVERS, branch

DYNAMIC_RATIO = 4.0
STATIC_RATIO = 1.1
POWER_AT_CAP = 0.85
"""Power over this share of the enforced limit while the SW power cap reason is set: the cap is
what holds the clock (a board under its cap for another reason draws less)."""
ENERGY_TOLERANCE = 0.2
"""The energy counter's rate may differ from the mean power reading by this share (+5 W):
the power reading is a 1 s average on Hopper, sampled five times."""
LIMIT_SLACK = 1.05
"""Power may read this much over the enforced limit (the reading's noise and averaging)."""

STATIC = {
    "max_sm_clock_mhz": ("nvmlDeviceGetMaxClockInfo:SM", None),
    "max_mem_clock_mhz": ("nvmlDeviceGetMaxClockInfo:MEM", None),
    "default_power_limit_mw": ("nvmlDeviceGetPowerManagementDefaultLimit", None),
    "enforced_power_limit_mw": ("nvmlDeviceGetEnforcedPowerLimit", None),
    "memory_total_bytes": ("nvmlDeviceGetMemoryInfo_v2", "total"),
    "slowdown_temp_c": ("nvmlDeviceGetTemperatureThreshold:SLOWDOWN", None),
    "shutdown_temp_c": ("nvmlDeviceGetTemperatureThreshold:SHUTDOWN", None),
    "pcie_max_gen": ("nvmlDeviceGetMaxPcieLinkGeneration", None),
    "pcie_max_width": ("nvmlDeviceGetMaxPcieLinkWidth", None),
}
"""Facts of the product: the same on every board of it (1.1x), within 4x for a near twin."""
DYNAMIC = {
    "power_mw": ("nvmlDeviceGetPowerUsage", None),
    "temperature_c": ("nvmlDeviceGetTemperature", None),
    "sm_clock_mhz": ("nvmlDeviceGetClockInfo:SM", None),
    "mem_clock_mhz": ("nvmlDeviceGetClockInfo:MEM", None),
}
"""Readings that move: compared idle, as means over the phase."""


def number(reading: dict[str, Any], label: str, field: str | None = None) -> float | None:
    got = reading["calls"].get(label) or {}
    v = got.get("value")
    if field is not None:
        v = v.get(field) if isinstance(v, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def series(phase: dict[str, Any], label: str, field: str | None = None) -> list[float]:
    vals = [number(r, label, field) for r in phase.get("readings") or []]
    return [v for v in vals if v is not None]


def gpm_mean(phase: dict[str, Any], metric: str) -> float | None:
    vals = [r["gpm"].get(metric) for r in phase.get("readings") or []]
    nums = [v for v in vals if isinstance(v, (int, float))]
    return mean(nums) if nums else None


def _mean(xs: list[float]) -> float | None:
    return mean(xs) if xs else None


# ---- the twin ---------------------------------------------------------------------------------


def twin_of(product: str, driver_version: str) -> tuple[str, str, bool, list[str]]:
    """(simulated board, simulated driver, same product, notes) for a real board."""
    notes = []
    same = [b for b in BOARDS.values() if b.name == product]
    if same:
        board, same_product = same[0].key, True
    else:
        board, same_product = "h100", False
        for b in BOARDS.values():
            if b.key.upper() in product.upper():  # an H100 PCIe: the (SXM) h100
                board = b.key
        notes.append(
            f"{product} has no simulated board of its own: held against the simulated "
            f"{BOARDS[board].name} (static facts within {DYNAMIC_RATIO:g}x, not "
            f"{STATIC_RATIO:g}x)"
        )
    try:
        real_branch = int(driver_version.split(".", 1)[0])
    except ValueError:
        real_branch = branch(DRIVERS[BOARDS[board].default_driver])
    driver = min(DRIVERS.values(), key=lambda d: (abs(branch(d) - real_branch), -branch(d))).key
    if branch(DRIVERS[driver]) != real_branch:
        notes.append(f"driver {driver_version}: the nearest simulated branch is {driver}")
    return board, driver, same_product, notes


# ---- the checks -------------------------------------------------------------------------------


def _status(result: dict[str, Any] | None) -> str:
    if result is None:
        return "not read"
    return "ok" if "value" in result else f"fails ({result['error']})"


def calls(real: dict[str, Any], sim: dict[str, Any]) -> list[str]:
    """Which calls fail, idle: the system calls, the first reading's device calls, GPM."""
    out = []
    r_idle, s_idle = real["phases"]["idle"], sim["phases"]["idle"]
    pairs = [(r_idle.get("system") or {}, s_idle.get("system") or {})]
    if r_idle.get("readings") and s_idle.get("readings"):
        pairs.append((r_idle["readings"][0]["calls"], s_idle["readings"][0]["calls"]))
    for r, s in pairs:
        for label in sorted(set(r) & set(s)):
            a, b = _status(r[label]), _status(s[label])
            if (a == "ok") != (b == "ok"):
                out.append(f"calls: {label} is {a} on the real board, {b} on the simulated one")
    r_gpm, s_gpm = _gpm_status(r_idle), _gpm_status(s_idle)
    for metric in sorted(set(r_gpm) & set(s_gpm)):
        if r_gpm[metric] != s_gpm[metric]:
            out.append(
                f"calls: GPM {metric} is {r_gpm[metric]} on the real board, "
                f"{s_gpm[metric]} on the simulated one"
            )
    return out


def _gpm_status(phase: dict[str, Any]) -> dict[str, str]:
    last = (phase.get("readings") or [{"gpm": {}}])[-1]["gpm"]
    if "error" in last:
        return {"(all)": f"fails ({last['error']})"}
    return {k: "ok" if isinstance(v, (int, float)) else f"fails ({v})" for k, v in last.items()}


def units(real: dict[str, Any], sim: dict[str, Any], same_product: bool) -> list[str]:
    out = []
    r_idle, s_idle = real["phases"]["idle"], sim["phases"]["idle"]
    for name, (label, field) in {**STATIC, **DYNAMIC}.items():
        a, b = _mean(series(r_idle, label, field)), _mean(series(s_idle, label, field))
        if not a or not b:
            continue  # not read on one side (the calls check says so), or zero
        limit = STATIC_RATIO if name in STATIC and same_product else DYNAMIC_RATIO
        ratio = a / b
        if not 1 / limit <= ratio <= limit:
            out.append(
                f"units: {name} reads {a:g} on the real board, {b:g} on the simulated "
                f"one ({ratio:.3g}x; within {limit:g}x expected)"
            )
    return out


def relations(phases: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Each relation's state per phase: holds, breaks, unreached (its condition never came),
    unmeasured (a reading it needs failed)."""
    out: dict[str, dict[str, str]] = {}
    for phase, p in phases.items():
        if not p.get("readings"):
            continue
        rel = out.setdefault(phase, {})
        util = _mean(series(p, "nvmlDeviceGetUtilizationRates", "gpu"))
        sm, tensor = gpm_mean(p, "sm_active_pct"), gpm_mean(p, "tensor_active_pct")
        dram = gpm_mean(p, "dram_bw_pct")
        if phase == "idle":
            rel["idle_reads_idle"] = _state(util is not None, util is not None and util < IDLE_UTIL)
        if phase == "tiny":
            if util is not None and util < LAUNCH_UTIL:
                rel["tiny_kernels_sm_under_util"] = "unreached"
            else:
                rel["tiny_kernels_sm_under_util"] = _state(
                    None not in (util, sm),
                    sm is not None and util is not None and sm < TINY_KERNELS * util,
                )
        if phase == "matmul":
            rel["matmul_on_tensor_cores"] = _state(tensor is not None, (tensor or 0) >= TENSOR_LOW)
        if phase == "bandwidth":
            rel["bandwidth_dram_bound"] = _state(
                None not in (dram, tensor), (dram or 0) >= DRAM_BUSY and (tensor or 0) < TENSOR_LOW
            )
        rel["power_cap_cuts_clock"] = _power_cap(p)
        rel["energy_rate_is_power"] = _energy(p)
        rel["within_limits"] = _within_limits(p)
    return out


def _state(measured: bool, holds: bool) -> str:
    return "unmeasured" if not measured else "holds" if holds else "breaks"


def _reasons(r: dict[str, Any]) -> float | None:
    v = number(r, "nvmlDeviceGetCurrentClocksEventReasons")
    return v if v is not None else number(r, "nvmlDeviceGetCurrentClocksThrottleReasons")


def _clock_and_power(r: dict[str, Any]) -> tuple[float | None, ...]:
    """A reading's SM clock and its max, its power and the enforced limit (None: not read)."""
    return (
        number(r, "nvmlDeviceGetClockInfo:SM"),
        number(r, "nvmlDeviceGetMaxClockInfo:SM"),
        number(r, "nvmlDeviceGetPowerUsage"),
        number(r, "nvmlDeviceGetEnforcedPowerLimit"),
    )


def _power_cap(p: dict[str, Any]) -> str:
    capped = [r for r in p["readings"] if int(_reasons(r) or 0) & REASON_SW_POWER_CAP]
    if not capped:
        return "unreached"
    ok = True
    for r in capped:
        clock, top, power, limit = _clock_and_power(r)
        if None in (clock, top, power, limit):
            return "unmeasured"
        ok &= clock < top and power >= POWER_AT_CAP * limit  # type: ignore[operator]
    return _state(True, ok)


def _energy(p: dict[str, Any]) -> str:
    rows = [
        (
            r["t_s"],
            number(r, "nvmlDeviceGetTotalEnergyConsumption"),
            number(r, "nvmlDeviceGetPowerUsage"),
        )
        for r in p["readings"]
    ]
    rows = [(t, e, w) for t, e, w in rows if e is not None and w is not None]
    if len(rows) < 2 or rows[-1][0] <= rows[0][0]:
        return "unmeasured"
    rate_w = (rows[-1][1] - rows[0][1]) / (rows[-1][0] - rows[0][0]) / 1000  # type: ignore[operator]
    power_w = mean(w for _, _, w in rows) / 1000  # type: ignore[misc]
    return _state(True, abs(rate_w - power_w) <= ENERGY_TOLERANCE * power_w + 5)


def _within_limits(p: dict[str, Any]) -> str:
    ok, measured = True, False
    for r in p["readings"]:
        clock, top, power, limit = _clock_and_power(r)
        if None not in (clock, top):
            measured, ok = True, ok and clock <= top  # type: ignore[operator]
        if None not in (power, limit):
            measured, ok = True, ok and power <= LIMIT_SLACK * limit  # type: ignore[operator]
    return _state(measured, ok)


def compare(real: dict[str, Any], sim: dict[str, Any], same_product: bool = True) -> dict[str, Any]:
    """Every disagreement between the real readings and the twin's, and each relation's state
    on both sides."""
    r_rel, s_rel = relations(real["phases"]), relations(sim["phases"])
    out = calls(real, sim) + units(real, sim, same_product)
    notes = []
    for phase, rels in r_rel.items():
        for name, state in rels.items():
            twin = s_rel.get(phase, {}).get(name, "not read")
            if state == "unmeasured":
                notes.append(f"{phase}: {name} could not be measured on the real board")
            elif state == "breaks" or state != twin:
                out.append(
                    f"relation: {name} under {phase} {state} on the real board, "
                    f"{twin} on the simulated one"
                )
    for phase, p in real["phases"].items():
        if not (p.get("load") or {}).get("ok", True):
            notes.append(f"{phase}: {p['load']['reason']}")
    return {
        "disagreements": out,
        "notes": notes,
        "relations": {
            ph: {
                n: {"real": st, "simulated": s_rel.get(ph, {}).get(n, "not read")}
                for n, st in rels.items()
            }
            for ph, rels in r_rel.items()
        },
    }
