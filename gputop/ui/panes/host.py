"""What the host pane says about the attached process tree: pure functions, styled by level.

Each level that the verdict also judges reads the rule's own threshold (a pane never disagrees
with the verdict); the rest are named here. Thresholds follow docs/facts/host-signals.md:
oversubscription shows as runnable threads well above the effective CPUs and as run-queue wait
(not as context switches); cgroup throttling as the share of CFS periods throttled; memory as
the working set against the limit (page cache does not count); pressure as PSI "some" over the
last 10 s.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from gputop.diagnose import (
    CPU_THROTTLED,
    IO_PRESSURE,
    MEM_NEAR,
    MEM_PRESSURE,
    MEM_RISK,
    RUNNABLE_PER_CPU,
    RUNQ_PER_CPU,
)
from gputop.diagnose import WORKER_PEGGED as PEGGED
from gputop.model import DeviceInfo
from gputop.model.host import HostSample
from gputop.model.roles import CHILD
from gputop.session import SessionState
from gputop.ui.gpu_text import Line, StyleFor
from gputop.ui.panes.pane import Context, Pane

GIB = 1024**3
RUNQ_BAD_PER_CPU = 1.0
"""Run-queue wait (threads waiting per CPU) the pane shows as bad: a whole thread per CPU."""
THROTTLE_WARN = 0.05
"""Share of CFS periods throttled from which the pane warns, before the rule's CPU_THROTTLED."""
MEM_WARN = MEM_RISK
"""Working set over its limit from which the pane warns, before the rule's MEM_NEAR: where
the verdict says the memory risk."""
PSI_WARN = min(MEM_PRESSURE, IO_PRESSURE)
"""PSI some avg10 (%) from which a resource without a rule of its own (cpu) warns."""
PSI_BAD = 25.0
"""PSI some avg10 (%) the pane shows as bad: a quarter of the time stalled."""
PSI_SHOWN = (("cpu", "cpu", PSI_WARN), ("memory", "mem", MEM_PRESSURE), ("io", "io", IO_PRESSURE))
"""(resource, short name, the pressure its rule fires from) in the pane's order."""


def _n(v: float | None, fmt: str = "{:.0f}") -> str:
    return fmt.format(v) if v is not None else "n/a"


def threads_level(running: int | None, cpus: float | None) -> str:
    """Bad where the oversubscription rule counts runnable threads (RUNNABLE_PER_CPU per CPU);
    a warning once they outnumber the CPUs."""
    if running is None or not cpus:
        return "dim"
    if running > RUNNABLE_PER_CPU * cpus:
        return "bad"
    return "warn" if running > cpus else "value"


def runq_level(wait: float | None, cpus: float | None) -> str:
    """A warning where the oversubscription rule counts the run-queue wait (RUNQ_PER_CPU);
    bad when each CPU has a whole thread waiting (RUNQ_BAD_PER_CPU)."""
    if wait is None or not cpus:
        return "dim"
    per_cpu = wait / cpus
    if per_cpu > RUNQ_BAD_PER_CPU:
        return "bad"
    return "warn" if per_cpu > RUNQ_PER_CPU else "value"


def throttle_level(ratio: float | None) -> str:
    """Bad where the rule calls the cgroup's CPU quota a cause (CPU_THROTTLED of periods)."""
    if ratio is None:
        return "dim"
    if ratio > CPU_THROTTLED:
        return "bad"
    return "warn" if ratio > THROTTLE_WARN else "value"


def memory_level(used: int | None, limit: int | None, oom_kills: int) -> str:
    """Bad where the memory-pressure rule calls the working set near its limit (MEM_NEAR)."""
    if oom_kills:
        return "bad"
    if used is None or not limit:
        return "value"
    share = used / limit
    if share > MEM_NEAR:
        return "bad"
    return "warn" if share > MEM_WARN else "value"


def psi_level(avg10: float | None, fires: float = PSI_WARN) -> str:
    """A warning from where the resource's rule reads pressure as a cause (``fires``: the
    memory or io rule's threshold), bad past PSI_BAD."""
    if avg10 is None:
        return "dim"
    if avg10 > PSI_BAD:
        return "bad"
    return "warn" if avg10 > fires else "value"


def host_lines(h: HostSample, style: StyleFor, width: int, gpus: int = 0) -> list[Text]:
    """``gpus``: how many GPU rows the screen has (they go on after the target exits)."""
    head = Line(style).add(" host ", "name")
    if h.state == "exited":
        code = f" with status {h.exit_code}" if h.exit_code is not None else ""
        head.add(f"pid {h.pid} exited{code}", "bad")
        kills = h.cgroup.mem_events_new.get("oom_kill", 0) if h.cgroup else 0
        if kills:
            head.add(f" after {kills} OOM kill(s) in its cgroup", "bad")
        if gpus:
            head.label("; the GPU rows go on")
        return [head.text]
    main = h.main
    cpus = h.effective_cpus
    head.label("CPU ").add(_n(h.cpu_cores, "{:.1f}"))
    head.label(" of ").add(_n(cpus, "{:.1f}")).label(f" ({h.effective_cpus_source})  ")
    wide = width >= 120
    head.label("threads running " if wide else "running ")
    head.add(_n(h.threads_running), threads_level(h.threads_running, cpus))
    head.label("  run-queue wait " if wide else "  runq ")
    head.add(_n(h.runq_wait, "{:.1f}"), runq_level(h.runq_wait, cpus))
    omp = h.env.get("OMP_NUM_THREADS")
    if omp:
        head.label("  OMP ").add(omp)
    two = Line(style).label("   main ")
    if main is not None:
        if main.rank is not None:  # the target is itself one rank of a job
            two.label(f"(rank {main.rank}) ")
        two.add(f"{_n(main.cpu_cores, '{:.2f}')}", "value").label(" cores ")
        two.label("RSS ").add(_n(main.rss_bytes / GIB if main.rss_bytes else None, "{:.1f}"))
        two.label("G thr ").add(str(main.num_threads))
    ranks = h.ranks
    if ranks:
        two.label(f"  ranks {len(ranks)}: ")
        for r in ranks[:8]:
            two.label(f"{r.rank if r.rank is not None else '?'} ")
            two.add(f"{_n((r.cpu_cores or 0) * 100)}% ", "value")
        if len(ranks) > 8:
            two.label("… ")
    workers = h.workers
    if workers:
        pegged = sum(1 for w in workers if (w.cpu_cores or 0) >= PEGGED)
        two.label(f"  workers {len(workers)}: ")
        for w in workers[:8]:
            level = "warn" if (w.cpu_cores or 0) >= PEGGED else "value"
            two.add(f"{_n((w.cpu_cores or 0) * 100)}% ", level)
        if len(workers) > 8:
            two.label("… ")
        two.add(f"({pegged} pegged)", "bad" if pegged == len(workers) else "label")
    else:
        children = [p for p in h.processes if p.role == CHILD]
        two.label("  workers 0")
        if children:
            two.label(f"  children {len(children)}")
    disk_wait = sum(p.threads_disk_wait or 0 for p in h.processes)
    if disk_wait:
        two.add(f"  {disk_wait} in disk wait", "warn")
    three = Line(style).label("   ")
    c = h.cgroup
    if c is not None and c.cpu_quota_cpus is not None:
        ratio = c.throttled_ratio
        three.label("throttled " if wide else "thr ")
        three.add(f"{_n(ratio * 100 if ratio is not None else None)}%", throttle_level(ratio))
        three.label(" of periods  " if wide else "  ")
    if c is not None:
        used = c.mem_working_set_bytes
        limit = c.mem_limit_bytes
        kills = c.mem_events_new.get("oom_kill", 0)
        three.label("memory " if wide else "mem ")
        level = memory_level(used, limit, kills)
        three.add(_n(used / GIB if used is not None else None, "{:.1f}"), level)
        three.label(f"/{_n(limit / GIB, '{:.1f}')}G  " if limit else "G (no limit)  ")
        if kills:
            three.add(f"OOM KILL x{kills}  ", "bad")
        if c.psi:
            three.label(f"PSI({c.psi_scope}) " if wide else "PSI ")
            for res, short, fires in PSI_SHOWN:
                avg = c.psi.get(res, {}).get("some_avg10")
                level = psi_level(avg, fires)
                three.label(f"{res if wide else short} ").add(f"{_n(avg)}% ", level)
    reads = sum(p.read_chars_rate or 0 for p in h.processes)
    disk = sum(p.read_bytes_rate or 0 for p in h.processes)
    three.label(" read " if wide else "rd ").add(f"{reads / 1e6:.0f}")
    three.label(" MB/s (disk " if wide else "MB/s (disk ").add(f"{disk / 1e6:.0f}").label(")")
    return [head.text, two.text, three.text]


class HostPane(Pane):
    """The attached process tree: CPU against effective CPUs, threads, workers, cgroup."""

    ORDER = 20
    SOURCE = "host"
    READS = frozenset({"host"})

    @classmethod
    def make(cls, devices: Sequence[DeviceInfo]) -> HostPane:
        return cls(len(devices))

    def draw(self, state: SessionState, context: Context) -> None:
        if state.host is not None:
            self.show(state.host)

    def __init__(self, gpus: int = 0) -> None:
        super().__init__(id="host")
        self.sample: HostSample | None = None
        self.gpus = gpus

    def show(self, sample: HostSample) -> None:
        self.sample = sample
        self.changed()

    def build_lines(self, width: int) -> list[Text]:
        if self.sample is None:
            return [Text(" host: waiting for the first reading", style=self.style_for("dim"))]
        return host_lines(self.sample, self.style_for, width, self.gpus)
