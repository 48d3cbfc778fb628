"""What the host pane says about the attached process tree: pure functions, styled by level.

Thresholds follow docs/facts/host-signals.md: oversubscription shows as runnable threads well
above the effective CPUs and as run-queue wait (not as context switches); cgroup throttling as
the share of CFS periods throttled; memory as the working set against the limit (page cache
does not count); pressure as PSI "some" over the last 10 s.
"""

from __future__ import annotations

from rich.text import Text

from gputop.diagnose.signals import WORKER_PEGGED as PEGGED
from gputop.model.host import HostSample, ProcSample
from gputop.ui.gpu_text import Line, StyleFor

GIB = 1024**3


def _n(v: float | None, fmt: str = "{:.0f}") -> str:
    return fmt.format(v) if v is not None else "n/a"


def threads_level(running: int | None, cpus: float | None) -> str:
    if running is None or not cpus:
        return "dim"
    if running > 1.5 * cpus:
        return "bad"
    return "warn" if running > cpus else "value"


def runq_level(wait: float | None, cpus: float | None) -> str:
    if wait is None or not cpus:
        return "dim"
    per_cpu = wait / cpus
    if per_cpu > 1.0:
        return "bad"
    return "warn" if per_cpu > 0.5 else "value"


def throttle_level(ratio: float | None) -> str:
    if ratio is None:
        return "dim"
    if ratio > 0.2:
        return "bad"
    return "warn" if ratio > 0.05 else "value"


def memory_level(used: int | None, limit: int | None, oom_kills: int) -> str:
    if oom_kills:
        return "bad"
    if used is None or not limit:
        return "value"
    share = used / limit
    if share > 0.9:
        return "bad"
    return "warn" if share > 0.8 else "value"


def psi_level(avg10: float | None) -> str:
    if avg10 is None:
        return "dim"
    if avg10 > 25:
        return "bad"
    return "warn" if avg10 > 10 else "value"


def _cmd(p: ProcSample, width: int) -> str:
    text = p.cmdline or p.name
    return text if len(text) <= width else text[: width - 1] + "…"


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
        children = [p for p in h.processes if p.role == "child"]
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
            for res, short in (("cpu", "cpu"), ("memory", "mem"), ("io", "io")):
                avg = c.psi.get(res, {}).get("some_avg10")
                three.label(f"{res if wide else short} ").add(f"{_n(avg)}% ", psi_level(avg))
    reads = sum(p.read_chars_rate or 0 for p in h.processes)
    disk = sum(p.read_bytes_rate or 0 for p in h.processes)
    three.label(" read " if wide else "rd ").add(f"{reads / 1e6:.0f}")
    three.label(" MB/s (disk " if wide else "MB/s (disk ").add(f"{disk / 1e6:.0f}").label(")")
    return [head.text, two.text, three.text]
