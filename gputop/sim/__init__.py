"""The simulated GPU board: a fake libnvidia-ml below the real pynvml, for machines with no GPU."""

from gputop.sim.board import Fault, SimBoard, SimProcess
from gputop.sim.boards import BOARDS, BoardProfile, SimConfigError, parse_board
from gputop.sim.drivers import CURRENT_DRIVER, DRIVERS, get_driver
from gputop.sim.install import install, installed, start_simulated_board, uninstall
from gputop.sim.scenarios import SCENARIOS, get_scenario

__all__ = [
    "BOARDS",
    "CURRENT_DRIVER",
    "DRIVERS",
    "SCENARIOS",
    "BoardProfile",
    "Fault",
    "SimBoard",
    "SimConfigError",
    "SimProcess",
    "get_driver",
    "get_scenario",
    "install",
    "installed",
    "parse_board",
    "start_simulated_board",
    "uninstall",
]
