"""The simulated board held against kept real readings (tests/gpu/fixtures/*/nvml.json, made by
tests/gpu/check.sh on a lent GPU): fields, units, which calls fail, and the relations the rules
rely on. Skipped while no real fixture exists; the comparison itself is exercised on a fixture
the dry mode made from the simulated H100 (``"simulated": true``), with planted changes that
must each give exactly the planted disagreement."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from nvml_compare import compare, twin_of
from nvml_phases import simulated

FIXTURES = Path(__file__).parent / "fixtures"


def _kept(simulated_flag: bool) -> list[Path]:
    return sorted(
        p
        for p in FIXTURES.glob("*/nvml.json")
        if json.loads(p.read_text()).get("simulated") is simulated_flag
    )


REAL = _kept(False)


def against_twin(doc: dict) -> dict:
    board, driver, same, notes = twin_of(doc["product"], doc["driver"])
    result = compare(doc, {"phases": simulated(board, driver)}, same_product=same)
    result["notes"] += notes
    return result


@pytest.mark.skipif(not REAL, reason="no real GPU fixture yet: tests/gpu/README.md says how")
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.parent.name)
def test_the_simulated_board_agrees_with_a_real_board(path):
    result = against_twin(json.loads(path.read_text()))
    assert result["disagreements"] == [], "\n".join(result["disagreements"] + result["notes"])


@pytest.fixture(scope="module")
def sim_fixture() -> dict:
    (path,) = _kept(True)
    doc = json.loads(path.read_text())
    assert doc["simulated"] is True and doc["product"] == "NVIDIA H100 80GB HBM3"
    return doc


def test_the_kept_simulated_fixture_agrees_with_its_twin(sim_fixture):
    result = against_twin(sim_fixture)
    assert result["disagreements"] == []
    states = {
        (ph, n): s["real"] for ph, rels in result["relations"].items() for n, s in rels.items()
    }
    # the relations the rules rely on are reached, not vacuously agreed on
    assert states[("tiny", "tiny_kernels_sm_under_util")] == "holds"
    assert states[("matmul", "matmul_on_tensor_cores")] == "holds"
    assert states[("bandwidth", "bandwidth_dram_bound")] == "holds"
    assert states[("idle", "idle_reads_idle")] == "holds"
    assert {s for (_, n), s in states.items() if n == "energy_rate_is_power"} == {"holds"}


def _readings(doc: dict, phases=("idle", "matmul", "bandwidth", "tiny")):
    return [r for ph in phases for r in doc["phases"][ph]["readings"]]


def _set(r: dict, label: str, fn) -> None:
    r["calls"][label]["value"] = fn(r["calls"][label]["value"])


def plant_call_fails(doc):
    doc["phases"]["idle"]["readings"][0]["calls"]["nvmlDeviceGetTemperatureV"] = {
        "error": "NVMLError_FunctionNotFound"
    }


def plant_power_in_watts(doc):
    for r in _readings(doc):
        _set(r, "nvmlDeviceGetPowerUsage", lambda v: v // 1000)


def plant_pcie_h100_max_clock(doc):
    for r in _readings(doc):
        _set(r, "nvmlDeviceGetMaxClockInfo:SM", lambda v: 1755)
        _set(r, "nvmlDeviceGetClockInfo:SM", lambda v: min(v, 1755))


def plant_sm_as_busy_as_util(doc):
    for r in _readings(doc, ("tiny",)):
        r["gpm"]["sm_active_pct"] = r["calls"]["nvmlDeviceGetUtilizationRates"]["value"]["gpu"]


def plant_power_cap_reached(doc):
    """At its limit, the clock cut: the energy counter rising with the power drawn."""
    readings = _readings(doc, ("matmul",))
    e0 = readings[0]["calls"]["nvmlDeviceGetTotalEnergyConsumption"]["value"]
    for r in readings:
        limit = r["calls"]["nvmlDeviceGetEnforcedPowerLimit"]["value"]
        _set(r, "nvmlDeviceGetCurrentClocksEventReasons", lambda v: v | 0x4)
        _set(r, "nvmlDeviceGetClockInfo:SM", lambda v: 1710)
        _set(r, "nvmlDeviceGetPowerUsage", lambda v: int(0.97 * limit))  # noqa: B023
        r["calls"]["nvmlDeviceGetTotalEnergyConsumption"]["value"] = int(
            e0 + 0.97 * limit * (r["t_s"] - readings[0]["t_s"])
        )


def plant_energy_in_joules(doc):
    for r in _readings(doc):
        _set(r, "nvmlDeviceGetTotalEnergyConsumption", lambda v: v // 1000)


PLANTED = [
    (plant_call_fails, ["calls: nvmlDeviceGetTemperatureV is fails"]),
    (
        plant_power_in_watts,
        ["units: power_mw"]
        + [
            f"relation: energy_rate_is_power under {ph} breaks"
            for ph in ("idle", "matmul", "bandwidth", "tiny")
        ],
    ),
    (plant_pcie_h100_max_clock, ["units: max_sm_clock_mhz"]),
    (plant_sm_as_busy_as_util, ["relation: tiny_kernels_sm_under_util under tiny breaks"]),
    (
        plant_power_cap_reached,
        ["relation: power_cap_cuts_clock under matmul holds on the real board, unreached"],
    ),
    (
        plant_energy_in_joules,
        [
            f"relation: energy_rate_is_power under {ph} breaks"
            for ph in ("idle", "matmul", "bandwidth", "tiny")
        ],
    ),
]


@pytest.mark.parametrize(("plant", "expected"), PLANTED, ids=lambda x: getattr(x, "__name__", ""))
def test_a_planted_change_gives_exactly_its_disagreement(sim_fixture, plant, expected):
    doc = copy.deepcopy(sim_fixture)
    plant(doc)
    got = against_twin(doc)["disagreements"]
    assert len(got) == len(expected), "\n".join(got)
    for line, start in zip(got, expected, strict=True):
        assert line.startswith(start), (line, start)


def test_an_h200_is_held_against_the_h100_with_a_note_and_the_nearest_driver():
    board, driver, same, notes = twin_of("NVIDIA H200", "580.159.04")
    assert (board, driver, same) == ("h100", "r580", False)
    assert "NVIDIA H200 has no simulated board of its own" in notes[0]
    assert twin_of("NVIDIA A100-SXM4-40GB", "572.16")[:3] == ("a100", "r570", True)
