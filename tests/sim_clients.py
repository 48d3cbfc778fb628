"""Run real NVML clients (nvitop 1.7.2, gpustat 1.1.1) over a simulated board, in-process.

Each run happens in a forked child: the clients keep module-level state (nvitop's init flags,
its probed versioned symbols and FunctionNotFound log, gpustat's memory-v2 probe), so a fresh
fork per board and driver starts them as a new process would, without a new interpreter.
The child installs the board below pynvml, records every C symbol the clients look up (and
which were missing), and sends back what each client showed as JSON.

    python tests/sim_clients.py h100x8 r470     # one report, for a human
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pynvml

from gputop.sim import SimBoard, SimProcess, install

NA = "N/A"
PROCESS_MEMORY = 2 * 1024**3
"""What the board's one process holds on device 0 (bytes)."""


@dataclass
class ClientRun:
    """What the clients saw on one board and driver."""

    board: str
    driver: str
    called: list[str] = field(default_factory=list)
    """Every C symbol looked up in the fake library, in first-use order."""
    missing: list[str] = field(default_factory=list)
    """Symbols looked up that this driver generation does not export."""
    errors: list[str] = field(default_factory=list)
    """Exceptions out of a client, and log records at WARNING or above."""
    unknown_functions: list[str] = field(default_factory=list)
    """nvitop's own FunctionNotFound log (libnvml.UNKNOWN_FUNCTIONS)."""
    nvitop: list[dict[str, Any]] = field(default_factory=list)
    """One entry per device (physical, then its MIG devices): property -> value."""
    nvitop_lookup: dict[str, Any] = field(default_factory=dict)
    """Device(uuid=...) and Device(bus_id=...) -> the index they found."""
    nvitop_processes: list[dict[str, Any]] = field(default_factory=list)
    nvitop_once: str = ""
    gpustat: dict[str, Any] = field(default_factory=dict)
    gpustat_json: dict[str, Any] = field(default_factory=dict)
    gputop: dict[str, Any] = field(default_factory=dict)
    """gputop's own snapshot document (the `gputop snapshot --json` code path)."""
    after_shutdown: str = ""
    """What a per-device call answers once NVML is shut down."""


class RecordingLib:
    """The fake library as pynvml sees it, noting each symbol looked up."""

    def __init__(self, lib: Any, run: ClientRun) -> None:
        self._lib = lib
        self._run = run

    def __getattr__(self, name: str) -> Any:
        if name not in self._run.called:
            self._run.called.append(name)
        try:
            return getattr(self._lib, name)
        except AttributeError:
            if name not in self._run.missing:
                self._run.missing.append(name)
            raise


class _Errors(logging.Handler):
    def __init__(self, run: ClientRun) -> None:
        super().__init__(logging.WARNING)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        self.run.errors.append(f"log {record.name}: {record.getMessage()}")


def _plain(v: Any) -> Any:
    """A client's value as JSON: nvitop's NA is the string "N/A"; namedtuples become lists."""
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int | float):
        return type(v)(v) if type(v) in (int, float) else float(v)
    return str(v)


NVITOP_PROPERTIES = (
    "name",
    "uuid",
    "bus_id",
    "serial",
    "memory_total",
    "memory_used",
    "memory_free",
    "memory_percent",
    "bar1_memory_total",
    "bar1_memory_used",
    "bar1_memory_free",
    "bar1_memory_percent",
    "gpu_utilization",
    "memory_utilization",
    "encoder_utilization",
    "decoder_utilization",
    "graphics_clock",
    "sm_clock",
    "memory_clock",
    "video_clock",
    "max_graphics_clock",
    "max_sm_clock",
    "max_memory_clock",
    "max_video_clock",
    "fan_speed",
    "temperature",
    "power_usage",
    "power_limit",
    "pcie_tx_throughput",
    "pcie_rx_throughput",
    "nvlink_link_count",
    "display_active",
    "display_mode",
    "current_driver_model",
    "persistence_mode",
    "performance_state",
    "total_volatile_uncorrected_ecc_errors",
    "compute_mode",
    "cuda_compute_capability",
    "mig_mode",
    "is_mig_device",
    # through Device.__getattr__: nvmlDeviceGet<Name>
    "curr_pcie_link_generation",
    "curr_pcie_link_width",
    "max_pcie_link_generation",
    "max_pcie_link_width",
)
MIG_PROPERTIES = ("gpu_instance_id", "compute_instance_id")


def _nvitop_device(dev: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"index": _plain(dev.index)}
    names = NVITOP_PROPERTIES + (MIG_PROPERTIES if dev.is_mig_device() else ())
    for name in names:
        out[name] = _plain(getattr(dev, name)())
    return out


def _run_nvitop_api(run: ClientRun) -> None:
    from nvitop import Device

    for dev in Device.all():
        run.nvitop.append(_nvitop_device(dev))
        for mig in dev.mig_devices():
            run.nvitop.append(_nvitop_device(mig))
        for pid, p in dev.processes().items():
            snap = p.as_snapshot()
            run.nvitop_processes.append(
                {
                    "device": _plain(dev.index),
                    "pid": pid,
                    "gpu_memory": _plain(snap.gpu_memory),
                    "gpu_sm_utilization": _plain(snap.gpu_sm_utilization),
                    "gpu_memory_utilization": _plain(snap.gpu_memory_utilization),
                }
            )
        run.nvitop_lookup[f"uuid:{dev.index}"] = _plain(Device(uuid=dev.uuid()).index)
        run.nvitop_lookup[f"bus_id:{dev.index}"] = _plain(Device(bus_id=dev.bus_id()).index)


def _run_nvitop_once(run: ClientRun) -> None:
    from nvitop import cli

    out = io.StringIO()
    argv, sys.argv = sys.argv, ["nvitop", "-1", "--colorful"]
    try:
        with contextlib.redirect_stdout(out):
            rc = cli.main()
    finally:
        sys.argv = argv
    run.nvitop_once = out.getvalue()
    if rc:
        run.errors.append(f"nvitop -1 exited {rc}")


def _run_gpustat(run: ClientRun) -> None:
    import gpustat
    from gpustat import cli

    run.gpustat = gpustat.new_query().jsonify()
    run.gpustat["query_time"] = str(run.gpustat["query_time"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main("gpustat", "--json")
    run.gpustat_json = json.loads(out.getvalue())


def _run_gputop(run: ClientRun) -> None:
    """gputop's snapshot document over the same board (one reading: static facts suffice)."""
    from gputop.snapshot import build_document
    from gputop.sources.nvml import NvmlSource

    source = NvmlSource.open()
    try:
        doc = build_document(source.devices, source.capabilities, source.sample(), "sim")
    finally:
        source.close()
    run.gputop = json.loads(json.dumps(doc, default=str))


def _after_shutdown(run: ClientRun) -> None:
    """Initialise and shut down once more: a per-device call must answer UNINITIALIZED."""
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlShutdown()
    while pynvml._nvmlLib_refcount > 0:  # the clients may have left theirs open
        pynvml.nvmlShutdown()
    try:
        pynvml.nvmlDeviceGetName(handle)
        run.after_shutdown = "answered"
    except pynvml.NVMLError as e:
        run.after_shutdown = type(e).__name__


def board_with_process(board: str, driver: str, scenario: str, pid: int) -> SimBoard:
    """The board on the real clock, settled, with process ``pid`` on device 0 (on its first MIG
    instance when split)."""
    sim = SimBoard(board, driver=driver, scenario=scenario, warmup_s=300.0)
    dev = sim.devices[0]
    dev.processes.append(
        SimProcess(pid=pid, used_mem_bytes=PROCESS_MEMORY, mig_index=0 if dev.mig else None)
    )
    return sim


STEPS: tuple[tuple[str, Callable[[ClientRun], None]], ...] = (
    # gputop first: importing gpustat patches pynvml's symbol lookup process-wide (a missing
    # *_v3 answers with *_v2), which would change what gputop probes
    ("gputop snapshot", _run_gputop),
    ("nvitop API", _run_nvitop_api),
    ("nvitop -1", _run_nvitop_once),
    ("gpustat", _run_gpustat),
    ("after shutdown", _after_shutdown),
)


def run_clients(board: str, driver: str, scenario: str = "idle") -> ClientRun:
    """In this process: install the board and run every client step, errors as values."""
    run = ClientRun(board=board, driver=driver)
    fake = install(board_with_process(board, driver, scenario, os.getpid()))
    pynvml.nvmlLib = RecordingLib(pynvml.nvmlLib, run)
    handler = _Errors(run)
    logging.getLogger().addHandler(handler)
    try:
        for name, step in STEPS:
            try:
                step(run)
            except Exception:
                run.errors.append(f"{name}: {traceback.format_exc(limit=-3)}")
    finally:
        logging.getLogger().removeHandler(handler)
    from nvitop.api import libnvml

    run.unknown_functions = sorted(str(f) for f, _ in libnvml.UNKNOWN_FUNCTIONS.values())
    del fake
    return run


def run_forked(board: str, driver: str, scenario: str = "idle") -> ClientRun:
    """``run_clients`` in a forked child (fresh client state), its result over a pipe."""
    import nvitop.api.libnvml  # noqa: F401  imported once, before the fork (not gpustat: above)

    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:
        code = 0
        try:
            os.close(read_fd)
            doc = asdict(run_clients(board, driver, scenario))
        except BaseException:
            doc = {"board": board, "driver": driver, "errors": [traceback.format_exc()]}
            code = 1
        try:
            with os.fdopen(write_fd, "w") as f:
                json.dump(doc, f)
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        raw = f.read()
    os.waitpid(child, 0)
    doc = json.loads(raw)
    return ClientRun(**doc)


def main(argv: list[str]) -> int:
    board, driver = argv[0], argv[1]
    scenario = argv[2] if len(argv) > 2 else "idle"
    run = run_forked(board, driver, scenario)
    print(json.dumps(asdict(run), indent=1))
    return 1 if run.errors or run.missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
