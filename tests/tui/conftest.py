"""TUI fixtures: apps fed from a simulated board on a frozen clock, no sampling thread,
no user config, UTC time, so every screen is deterministic."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputop.config import Config
from gputop.model import GpuSample
from gputop.sim import SimBoard, installed
from gputop.sources.nvml import NvmlSource
from gputop.ui.app import GputopApp

WALL0 = 1_795_000_000.0  # a fixed epoch time for headers and snapshot file names


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("GPUTOP_CONFIG", raising=False)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


class Recorded:
    """A feed built from a simulated board: static devices plus recorded history."""

    def __init__(self, source: NvmlSource, history: list[list[GpuSample]], label: str) -> None:
        self.source = source
        self.devices = source.devices
        self.capabilities = source.capabilities
        self.history = history
        self.label = label

    def sample(self) -> list[GpuSample]:
        return self.history[-1]


def record(
    board: str = "h100x8",
    scenario: str = "compute",
    ticks: int = 60,
    step: float = 2.0,
    driver: str = "r580",
    seed: int = 0,
) -> Recorded:
    clock = [1000.0]
    sim = SimBoard(
        board, scenario=scenario, driver=driver, seed=seed, clock=lambda: clock[0], warmup_s=300
    )
    with installed(sim):
        src = NvmlSource.open(clock=lambda: clock[0], wall=lambda: WALL0 + clock[0])
        history = []
        for _ in range(ticks):
            clock[0] += step
            history.append(src.sample())
        src.close()
    return Recorded(src, history, sim.short_label)


@pytest.fixture
def make_app(tmp_path) -> Iterator[Callable[..., GputopApp]]:
    def make(recorded: Recorded | None = None, config: Config | None = None, **kw) -> GputopApp:
        recorded = recorded or record()
        config = config or Config(
            snapshot_dir=tmp_path / "snapshots", themes_dir=tmp_path / "no-themes"
        )
        app = GputopApp(
            recorded,
            config=config,
            simulated=kw.pop("simulated", recorded.label),
            start_sampler=False,
            **kw,
        )
        app.recorded = recorded  # type: ignore[attr-defined]
        return app

    yield make


async def ingest_all(app: GputopApp, pilot) -> None:
    for samples in app.recorded.history:  # type: ignore[attr-defined]
        app.take("gpu", samples)
    await pilot.pause()


def fed(app: GputopApp, *then: Callable[[], object]):
    """A ``run_before`` for snapshot tests: every recorded GPU reading, then ``then`` calls."""

    async def run_before(pilot) -> None:
        await ingest_all(app, pilot)
        for call in then:
            call()
        await pilot.pause()

    return run_before


def snapshot_dir_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else []


os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")


def host_sample(kind: str = "starved", pid: int = 4242):
    """A hand-built HostSample: deterministic input for the host pane."""
    from types import MappingProxyType as M

    from gputop.model.host import CgroupSample, HostSample, ProcSample, ThreadInfo

    def proc(pid, role, name, cpu, threads=4, running=1, runq=0.1):
        return ProcSample(
            pid=pid, start_ticks=1, ppid=4242 if role != "main" else 1, name=name,
            cmdline="python train.py --workers 4" if role != "worker" else "",
            role=role, state="R" if cpu > 0.5 else "S", cpu_cores=cpu, rss_bytes=6 << 30,
            uss_bytes=None, pss_bytes=None, num_threads=threads, threads_running=running,
            threads_disk_wait=0, threads=(ThreadInfo(pid, name, "S", 0.1),), runq_wait=runq,
            ctx_voluntary_rate=100.0, ctx_involuntary_rate=20.0, read_chars_rate=50e6,
            read_bytes_rate=0.0, write_bytes_rate=0.0, open_fds=40,
        )  # fmt: skip

    if kind == "exited":
        return HostSample(pid=pid, t=1.0, wall=WALL0, state="exited", exit_code=137,
                          processes=(), effective_cpus=None, effective_cpus_source="",
                          affinity_cpus=None, cgroup=None, env=M({}))  # fmt: skip
    procs = [proc(pid, "main", "python", 0.12, threads=38, running=1, runq=0.2)]
    procs += [
        proc(5000 + i, "worker", "pt_data_worker", c)
        for i, c in enumerate((0.97, 0.95, 0.99, 0.93))
    ]
    cgroup = CgroupSample(
        version="v2", cpu_quota_cpus=4.0, cpu_quota_path="/sys/fs/cgroup/job",
        cpu_usage_cores=3.9, throttled_ratio=0.62, throttled_s_per_s=0.4,
        mem_limit_bytes=32 << 30, mem_limit_path="/sys/fs/cgroup/job",
        mem_current_bytes=30 << 30, mem_working_set_bytes=29 << 30,
        mem_events=M({"oom_kill": 0}), mem_events_new=M({"oom_kill": 0}), swap_bytes=0,
        psi_scope="cgroup",
        psi=M({"cpu": M({"some_avg10": 31.0}), "memory": M({"some_avg10": 2.0}),
               "io": M({"some_avg10": 0.0})}),
    )  # fmt: skip
    return HostSample(
        pid=pid, t=1.0, wall=WALL0, state="running", exit_code=None, processes=tuple(procs),
        effective_cpus=4.0, effective_cpus_source="cgroup quota", affinity_cpus=64,
        cgroup=cgroup, env=M({"OMP_NUM_THREADS": "64"}),
    )  # fmt: skip


class FixedHost:
    """A host feed that always reports the same sample."""

    def __init__(self, sample) -> None:
        self.sample_value = sample
        self.pid = sample.pid

    def sample(self):
        return self.sample_value


def agents_sample(
    ranks: int = 1, slow_rank: int | None = None, data_ms: float = 52.0, steps_kept: int = 40,
    slow_inputs: float = 1.0,
):  # fmt: skip
    """Hand-built agent states: deterministic input for the step and ranks panes.
    ``slow_inputs``: the slow rank's input elements per step over the others' (4096)."""
    from types import MappingProxyType as M

    from gputop.model.steps import AgentsSample, AgentState, StepRecord

    agents = []
    for r in range(ranks):
        extra = 30.0 if r == slow_rank else 0.0
        steps = []
        for i in range(steps_kept):
            jitter = (i * 7 % 5) * 0.4
            phases = {"data_wait": data_ms + jitter, "h2d": 2.0, "forward": 20.0 + extra,
                      "backward": 22.0, "optimizer": 4.0}  # fmt: skip
            if ranks > 1:
                phases["grad_sync"] = 3.0 + (30.0 - extra if slow_rank is not None else 0.0)
            total = sum(phases.values()) + 1.0
            steps.append(
                StepRecord(
                    step=i,
                    t0_ns=int(i * total * 1e6),
                    dur_ns=int(total * 1e6),
                    phases=M({k: int(v * 1e6) for k, v in phases.items()}),
                    samples=64,
                    tokens=64 * 512,
                    flops=2.0e14 * total / 1000,
                    inputs=int(4096 * (slow_inputs if r == slow_rank else 1.0)),
                )
            )
        agents.append(
            AgentState(
                pid=7000 + r,
                state="connected",
                rank=r if ranks > 1 else None,
                local_rank=r if ranks > 1 else None,
                world_size=ranks if ranks > 1 else None,
                hostname="node",
                argv=("train.py",),
                fingerprint=M(
                    {
                        "OMP_NUM_THREADS": None,
                        "intra_op_threads": 8,
                        "dataloader": M({"num_workers": 0, "pin_memory": False}),
                    }
                ),
                steps=tuple(steps),
                open_phase="forward",
                open_age_s=0.012,
                since_step_s=0.05,
                heartbeat_age_s=0.2,
                agent_errors=0,
                dropped=0,
            )
        )
    return AgentsSample(target=7000, t=1.0, wall=WALL0, agents=tuple(agents))


class FixedAgents:
    def __init__(self, sample) -> None:
        self.sample_value = sample

    def sample(self):
        return self.sample_value


def stacks_window(error: str | None = None):
    """Hand-built stack samples: a main thread mostly waiting on the DataLoader."""
    from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack

    loader = "torch/utils/data/dataloader.py"
    wait = (Frame("_MultiProcessingDataLoaderIter._try_get_data", loader, 1162),
            Frame("main", "train.py", 40))  # fmt: skip
    fwd = (
        Frame("Module._call_impl", "torch/nn/modules/module.py", 1789),
        Frame("main", "train.py", 44),
    )
    fetch = (Frame("_MapDatasetFetcher.fetch", "torch/utils/data/_utils/fetch.py", 57),
             Frame("_worker_loop", "torch/utils/data/_utils/worker.py", 349))  # fmt: skip
    out = []
    for i in range(10):
        frames, phase = (fwd, "forward") if i % 4 == 0 else (wait, "data wait")
        main = ThreadStack(4242, "MainThread", phase == "forward", frames, phase, frames[0])
        worker = ThreadStack(5000, "MainThread", True, fetch, "fetch/transform", fetch[0])
        procs = [ProcessStacks(4242, "main", (main,), None, 0.02),
                 ProcessStacks(5000, "worker", (worker,), None, 0.02)]  # fmt: skip
        if error:
            procs.append(ProcessStacks(5001, "worker", (), error, 0.01))
        out.append(StacksSample(4242, float(i), WALL0 + i, tuple(procs)))
    return out


class FixedStacks:
    def __init__(self, window) -> None:
        self.window = window
        self.i = 0

    def sample(self):
        self.i += 1
        return self.window[min(self.i, len(self.window)) - 1]

    def dump_all(self):
        last = self.window[-1]
        return [(p.pid, p.role, list(p.threads), p.error) for p in last.processes]


def screen_rows(app) -> list[str]:
    """The main screen as plain text, a row per line (what the compositor would paint)."""
    return [
        "".join(seg.text for seg in strip).rstrip()
        for strip in app.screen._compositor.render_strips()
    ]
