"""Driver generations of the simulated board: symbol sets, each board's default driver, the
board and driver combinations that never existed, and R470's memory accounting."""

from __future__ import annotations

import itertools

import pynvml as N
import pytest

from gputop.sim import BOARDS, DRIVERS, SimBoard, SimConfigError, SimProcess, installed
from gputop.sim.boards import MIB
from gputop.sim.drivers import (
    CURRENT_DRIVER,
    MIN_BRANCH,
    UnsupportedDriver,
    branch,
    supported_drivers,
)

BY_AGE = sorted(DRIVERS.values(), key=branch)


def test_each_generation_exports_everything_the_older_ones_do():
    for older, newer in itertools.pairwise(BY_AGE):
        assert older.symbols <= newer.symbols, (older.key, newer.key)
        assert branch(older) < branch(newer)


def test_version_strings_and_cuda_versions_agree_with_the_keys():
    for d in DRIVERS.values():
        assert d.key == f"r{branch(d)}"
        assert 11000 <= d.cuda_version <= 13990 and d.cuda_version % 10 == 0


@pytest.mark.parametrize(
    ("board", "version", "cuda"),
    [
        ("h100", "580.105.08", 13000),
        ("a100", "570.148.08", 12080),
        ("l40s", "595.91.07", 13020),
        ("t4", "595.91.07", 13020),
    ],
)
def test_each_board_runs_its_captures_driver_when_none_is_named(board, version, cuda):
    sim = SimBoard(board)
    assert (sim.driver.version, sim.driver.cuda_version) == (version, cuda)
    with installed(sim):
        N.nvmlInit()
        try:
            assert N.nvmlSystemGetDriverVersion() == version
            assert N.nvmlSystemGetCudaDriverVersion() == cuda
        finally:
            N.nvmlShutdown()


def test_the_demo_board_keeps_the_current_driver():
    assert SimBoard("h100x8").driver.key == CURRENT_DRIVER == "r580"


def test_every_board_names_a_default_driver_that_runs_it():
    for b in BOARDS.values():
        assert DRIVERS[b.default_driver] in supported_drivers(b.architecture)
        assert b.architecture in MIN_BRANCH


@pytest.mark.parametrize("board", sorted(BOARDS))
@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_combinations_that_never_existed_are_refused_with_what_works(board, driver):
    profile = BOARDS[board]
    ok = [d.key for d in supported_drivers(profile.architecture)]
    if driver in ok:
        assert SimBoard(board, driver=driver).driver.key == driver
        return
    with pytest.raises(UnsupportedDriver) as e:
        SimBoard(board, driver=driver)
    assert isinstance(e.value, SimConfigError)  # the CLI turns it into a one-line usage error
    message = str(e.value)
    assert "\n" not in message and profile.name in message
    assert f"R{MIN_BRANCH[profile.architecture]} or later" in message
    assert message.endswith("use one of " + ", ".join(ok))


def test_hopper_and_ada_are_refused_on_the_drivers_that_predate_them():
    refused = {
        (b.key, d.key)
        for b in BOARDS.values()
        for d in DRIVERS.values()
        if d not in supported_drivers(b.architecture)
    }
    assert refused == {("h100", "r470"), ("h100", "r515"), ("l40s", "r470"), ("l40s", "r515")}


def _memory_v1(driver: str, used: int) -> tuple[int, int, int]:
    sim = SimBoard("a100", driver=driver)
    sim.devices[0].processes.append(SimProcess(4242, used))
    with installed(sim):
        N.nvmlInit()
        try:
            m = N.nvmlDeviceGetMemoryInfo(N.nvmlDeviceGetHandleByIndex(0))
        finally:
            N.nvmlShutdown()
    return m.total, m.used, m.free


def test_r470_v1_memory_leaves_the_reservation_out_of_used():
    a100 = BOARDS["a100"]
    total, used, free = _memory_v1("r470", 1024 * MIB)
    assert used == 1024 * MIB
    assert total == a100.mem_total - a100.mem_reserved
    assert used + free == total


@pytest.mark.parametrize("driver", ["r515", "r535", "r570", "r580", "r595"])
def test_r510_and_later_v1_memory_counts_the_reservation_as_used(driver):
    a100 = BOARDS["a100"]
    total, used, free = _memory_v1(driver, 1024 * MIB)
    assert used == 1024 * MIB + a100.mem_reserved
    assert total == a100.mem_total
    assert used + free == total
