"""Readings built by hand for tests: a device, a GPU reading, a step, an agent, in one place
(test modules import them: ``from builders import device, ...``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import MappingProxyType as M
from typing import Any

from gputop.model import Window
from gputop.model.gpu import DeviceInfo, GpuSample
from gputop.model.host import HostSample, ProcSample
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.sources.stack_phases import classify

MS = 1_000_000


def device(index: int, name: str = "NVIDIA H100 80GB HBM3") -> DeviceInfo:
    """An H100 SXM: 1980 MHz max SM clock, 700 W default limit, GPM supported."""
    return DeviceInfo(
        index, name, f"GPU-{index:08d}", None, None, "hopper", 1980, 1980, 2619, 700.0, 200.0,
        700.0, 80 << 30, 92, 87, 85, 95, 5, 16, 18, True, False,
    )  # fmt: skip


def gpu_sample(index: int, t: float, reasons: tuple[str, ...] = (), **kw: Any) -> GpuSample:
    """A busy GPU's reading at ``t`` (wall clock ``t`` + 1.7e9) showing ``reasons``."""
    fields: dict[str, Any] = {
        "sm_clock_mhz": 1980,
        "power_w": 650.0,
        "power_limit_w": 700.0,
        "temp_c": 70,
        "util_gpu_pct": 90,
        "mem_used_bytes": 40 << 30,
        "reasons_mask": 0x4 if reasons else 0,
        "reasons": reasons,
        "sm_active_pct": 80.0,
        "dram_bw_pct": 50.0,
    }
    return GpuSample(index, t, t + 1.7e9, **{**fields, **kw})


def step(n: int, t0_ns: int, phases_ms: dict[str, float], dur_ms: float | None = None,
         **kw: Any) -> StepRecord:  # fmt: skip
    """Step ``n`` from ``t0_ns``, its phases in milliseconds; it lasts their sum unless told."""
    total = dur_ms if dur_ms is not None else sum(phases_ms.values())
    ns = M({k: round(v * MS) for k, v in phases_ms.items()})
    return StepRecord(n, t0_ns, round(total * MS), ns, **kw)


def agent(pid: int, steps: tuple[StepRecord, ...], rank: int | None = None,
          **kw: Any) -> AgentState:  # fmt: skip
    """A connected agent (local rank = rank) with these recent steps, in forward."""
    fields: dict[str, Any] = {
        "state": "connected", "local_rank": rank, "world_size": None, "hostname": "node",
        "argv": ("python", "train.py"), "fingerprint": M({}), "open_phase": "forward",
        "open_age_s": 0.25, "since_step_s": 0.05, "heartbeat_age_s": 0.1, "agent_errors": 0,
        "dropped": 0,
    }  # fmt: skip
    return AgentState(pid=pid, rank=rank, steps=steps, **{**fields, **kw})


def job_readings(every_save: int, seconds: int, ranks: int = 1, slow_rank: int | None = None,
                 t0: float = 0.0, kept: int = 300):  # fmt: skip
    """One agents' reading a second (at ``t0`` + 1, + 2, ...) of ranks stepping 10 times a
    second (80 ms forward, 20 ms data), a 500-ms checkpoint every ``every_save`` seconds; rank
    ``slow_rank`` computes 40 ms longer and the others wait for it in their gradient sync.
    Each reading repeats the last ``kept`` steps, as an agent's does."""
    history: dict[int, list] = {r: [] for r in range(ranks)}
    n = 0
    for t in range(1, seconds + 1):
        for i in range(10):
            for r in range(ranks):
                phases = {"data_wait": 20.0, "forward": 80.0}
                if slow_rank is not None:
                    phases["forward"] += 40.0 if r == slow_rank else 0.0
                    phases["grad_sync"] = 0.0 if r == slow_rank else 40.0
                if t % every_save == 0 and i == 0:
                    phases["checkpoint"] = 500.0
                history[r].append(step(n, n * 100 * MS, phases))
            n += 1
        world = ranks if ranks > 1 else None
        agents = tuple(
            agent(100 + r, tuple(history[r][-kept:]), rank=r, world_size=world)
            for r in range(ranks)
        )
        yield AgentsSample(target=100, t=t0 + t, wall=1e9 + t0 + t, agents=agents)


PROC = {
    "start_ticks": 1, "ppid": 1, "cmdline": "train.py", "state": "R", "cpu_cores": 1.0,
    "rss_bytes": 1 << 30, "uss_bytes": None, "pss_bytes": None, "num_threads": 4,
    "threads_running": 1, "threads_disk_wait": 0, "threads": (), "runq_wait": 0.0,
    "ctx_voluntary_rate": None, "ctx_involuntary_rate": None, "read_chars_rate": None,
    "read_bytes_rate": None, "write_bytes_rate": None, "open_fds": None,
}  # fmt: skip
"""A Python process of the job at one core: 1 GiB resident, four threads, one running."""


def proc(pid: int = 100, role: str = "main", **fields: Any) -> ProcSample:
    """A process of the job, every field by name over ``PROC`` (a DataLoader worker is named as
    torch names it)."""
    name = "pt_data_worker" if role == "worker" else "python"
    return ProcSample(**{"pid": pid, "role": role, "name": name, **PROC, **fields})


def proc_sample(pid: int, role: str, cores: float, runq: float = 0.0, rank: int | None = None,
                running: int = 1) -> ProcSample:  # fmt: skip
    """A process of the job using ``cores``, its threads waiting ``runq`` s/s for a CPU."""
    return proc(pid, role, cpu_cores=cores, runq_wait=runq, rank=rank, threads_running=running)


def host_at(t: float, procs: Sequence[ProcSample], cpus: float = 8.0, **fields: Any) -> HostSample:
    """One host reading at ``t`` of a tree on ``cpus`` CPUs (the machine's), every other field
    by name."""
    base = {
        "pid": procs[0].pid if procs else 100, "t": float(t), "wall": 0.0, "state": "running",
        "exit_code": None, "processes": tuple(procs), "effective_cpus": cpus,
        "effective_cpus_source": "machine", "affinity_cpus": max(1, round(cpus)),
        "cgroup": None, "env": M({}),
    }  # fmt: skip
    return HostSample(**{**base, **fields})


def host_readings(procs: Sequence[ProcSample], times: Iterable[float], cpus: float = 8.0,
                  **fields: Any) -> Window:  # fmt: skip
    """Host readings of one tree at ``times``, as a window from the first to the last."""
    samples = tuple(host_at(t, procs, cpus, **fields) for t in times)
    return Window(samples, samples[0].t if samples else 0.0, samples[-1].t if samples else 0.0)


def host_window(procs: tuple[ProcSample, ...], cpus: float = 8.0, n: int = 5) -> Window:
    """``n`` host readings a second apart of one tree on ``cpus`` CPUs."""
    return replace_end(host_readings(procs, range(n), cpus, affinity_cpus=64), float(n))


def replace_end(w: Window, end: float) -> Window:
    """``w`` ending at ``end`` (a window of readings a second apart ends a second after them)."""
    return Window(w.samples, w.start, end)


Stack = tuple[tuple[str, str], ...]
"""A thread's frames as (file, function), innermost first."""


def stacks_window(threads: dict[tuple[int, str], list[Stack]], n: int = 20,
                  via: str = "py-spy") -> Window:  # fmt: skip
    """``n`` stack readings a second apart: each (pid, role)'s main thread cycles through its
    stacks (each a read of its own, by ``via``); phases classified as the stack source does."""
    samples = []
    for i in range(n):
        procs = []
        for (pid, role), stacks in threads.items():
            frames = tuple(Frame(name, file, 10 + j) for j, (file, name) in
                           enumerate(stacks[i % len(stacks)]))  # fmt: skip
            phase, deciding = classify(frames, True)
            t = ThreadStack(pid, "MainThread", True, frames, phase, deciding)
            procs.append(ProcessStacks(pid, role, (t,), via=via, taken=float(i)))
        samples.append(StacksSample(100, float(i), 0.0, tuple(procs)))
    return Window(tuple(samples), 0.0, float(n))
