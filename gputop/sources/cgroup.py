"""Another process's cgroup limits and pressure, cgroup v1, v2 and hybrid.

No library resolves *another* PID's limits (loky reads fixed paths for itself, psutil not at
all), so this is ours: ``/proc/<pid>/cgroup`` gives the path per hierarchy, relative to the
reader's cgroup-namespace root; ``/proc/self/mountinfo`` says where each hierarchy is mounted
and which part of it the mount shows (its root). Limits are hierarchical, so the quota is the
smallest along the ancestors we can see. Paths outside our namespace (``/../x``) cannot be
read from here, and say so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gputop.sources.procfs import read_bytes

V1_NO_LIMIT = 2**62
"""v1 memory.limit_in_bytes reads 9223372036854771712 (page-rounded 2^63-1) when unlimited."""


@dataclass(frozen=True)
class Mount:
    """A cgroup hierarchy as mounted here; ``root`` (the part it shows) turns a cgroup path into a
    directory."""

    root: str
    point: Path
    fstype: str
    options: frozenset[str]


@dataclass(frozen=True)
class CgroupPaths:
    """Where the target's cgroup directories are, per controller (None: not visible)."""

    version: str  # "v1", "v2" or "hybrid"
    cpu: Path | None = None
    cpuacct: Path | None = None
    memory: Path | None = None
    unified: Path | None = None
    roots: dict[str, Path] = field(default_factory=dict)
    """Mount point of each hierarchy: ancestors are walked up to here, no further."""
    problems: tuple[str, ...] = ()


def parse_mountinfo(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        after = right.split()
        if len(fields) < 5 or len(after) < 3:
            continue
        fstype = after[0]
        if fstype not in ("cgroup", "cgroup2"):
            continue
        options = frozenset(after[2].split(",")) | frozenset(fields[5].split(","))
        root = fields[3].replace("\\040", " ")
        point = Path(fields[4].replace("\\040", " "))
        mounts.append(Mount(root=root, point=point, fstype=fstype, options=options))
    return mounts


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """controller -> path; the v2 entry is under the key ``""``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def _join(mount: Mount, path: str) -> tuple[Path | None, str | None]:
    """The directory for ``path`` seen through ``mount``, or why it cannot be seen."""
    if path.startswith("/..") or "/../" in path:
        return None, f"cgroup {path} is outside gputop's cgroup namespace"
    root = mount.root.rstrip("/")
    if root and root != "/":
        if path == root or path.startswith(root + "/"):
            path = path[len(root) :]
        elif path != "/":
            return None, f"cgroup {path} is not under the mounted part {mount.root}"
    return mount.point / path.lstrip("/"), None


def resolve(
    pid: int, proc_root: Path = Path("/proc"), mountinfo: Path | None = None
) -> CgroupPaths:
    """The target's cgroup directories; never raises (problems are listed)."""
    problems: list[str] = []
    try:
        membership = parse_proc_cgroup((proc_root / str(pid) / "cgroup").read_text())
    except OSError as e:
        return CgroupPaths(version="unknown", problems=(f"cannot read its cgroup: {e.strerror}",))
    try:
        mounts = parse_mountinfo((mountinfo or proc_root / "self" / "mountinfo").read_text())
    except OSError as e:
        return CgroupPaths(version="unknown", problems=(f"cannot read mountinfo: {e.strerror}",))
    v1 = [m for m in mounts if m.fstype == "cgroup"]
    v2 = next((m for m in mounts if m.fstype == "cgroup2"), None)
    found: dict[str, Path | None] = {}
    roots: dict[str, Path] = {}
    for controller in ("cpu", "cpuacct", "memory"):
        mount = next((m for m in v1 if controller in m.options), None)
        if mount is None or controller not in membership:
            continue
        found[controller], problem = _join(mount, membership[controller])
        roots[controller] = mount.point
        if problem:
            problems.append(problem)
    unified = None
    if v2 is not None and "" in membership:
        unified, problem = _join(v2, membership[""])
        roots["unified"] = v2.point
        if problem:
            problems.append(problem)
    has_v1 = any(p is not None for p in found.values())
    if has_v1 and unified is not None:
        version = "hybrid"
    elif has_v1:
        version = "v1"
    elif unified is not None:
        version = "v2"
    else:
        version = "none"
    if not has_v1 and unified is not None:
        # pure v2: every controller lives in the one hierarchy
        found = {"cpu": unified, "cpuacct": unified, "memory": unified}
        roots.update(cpu=v2.point, cpuacct=v2.point, memory=v2.point)  # type: ignore[union-attr]
    return CgroupPaths(
        version=version,
        cpu=found.get("cpu"),
        cpuacct=found.get("cpuacct"),
        memory=found.get("memory"),
        unified=unified,
        roots=roots,
        problems=tuple(problems),
    )


def ancestors(path: Path, stop: Path) -> list[Path]:
    """``path`` and its parents up to and including ``stop`` (the mount point)."""
    out = [path]
    while path != stop and path.parent != path and stop in path.parents:
        path = path.parent
        out.append(path)
    return out


def _read(path: Path) -> str | None:
    """A cgroup file's text (read every tick: the plain-fd read, not pathlib's file object)."""
    try:
        return read_bytes(str(path)).decode(errors="replace")
    except OSError:
        return None


def _kv(text: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


@dataclass(frozen=True)
class Limit:
    """The smallest limit found up the hierarchy, and the cgroup that sets it."""

    value: float
    path: Path


def _smallest(
    start: Path | None, stop: Path | None, read: Callable[[Path], float | None]
) -> Limit | None:
    """Limits are hierarchical: the tightest one on ``start`` or a visible ancestor wins."""
    if start is None:
        return None
    best: Limit | None = None
    for d in ancestors(start, stop or start):
        value = read(d)
        if value is not None and (best is None or value < best.value):
            best = Limit(value=value, path=d)
    return best


def _cpus(d: Path) -> float | None:
    text = _read(d / "cpu.max")
    if text is not None:  # v2: "$MAX $PERIOD", "max" when unlimited
        parts = text.split()
        return int(parts[0]) / int(parts[1]) if len(parts) == 2 and parts[0] != "max" else None
    quota, period = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
    if quota is not None and period is not None and int(quota) > 0:
        return int(quota) / int(period)  # v1: -1 when unlimited
    return None


def _memory_max(d: Path) -> float | None:
    v2 = _read(d / "memory.max")
    if v2 is not None:
        return None if v2.strip() == "max" else int(v2)
    v1 = _read(d / "memory.limit_in_bytes")
    return int(v1) if v1 is not None and int(v1) < V1_NO_LIMIT else None


def cpu_quota(paths: CgroupPaths) -> Limit | None:
    """The smallest CPU quota, in CPUs, on the target's cgroup or any visible ancestor."""
    return _smallest(paths.cpu, paths.roots.get("cpu"), _cpus)


def memory_limit(paths: CgroupPaths) -> Limit | None:
    """The smallest memory limit, in bytes, on the target's cgroup or any visible ancestor."""
    limit = _smallest(paths.memory, paths.roots.get("memory"), _memory_max)
    return Limit(value=int(limit.value), path=limit.path) if limit else None


@dataclass(frozen=True)
class CpuStat:
    """Cumulative counters; rates come from two readings."""

    nr_periods: int
    nr_throttled: int
    throttled_s: float
    usage_s: float | None


def cpu_stat(paths: CgroupPaths, where: Path | None) -> CpuStat | None:
    d = where or paths.cpu
    if d is None:
        return None
    stat = _kv(_read(d / "cpu.stat"))
    if not stat:
        return None
    if "throttled_usec" in stat or "usage_usec" in stat:  # v2
        throttled = stat.get("throttled_usec", 0) / 1e6
        usage = stat["usage_usec"] / 1e6 if "usage_usec" in stat else None
    else:  # v1: ns, and usage lives in cpuacct
        throttled = stat.get("throttled_time", 0) / 1e9
        raw = _read((paths.cpuacct or d) / "cpuacct.usage")
        usage = int(raw) / 1e9 if raw and raw.strip().isdigit() else None
    return CpuStat(
        nr_periods=stat.get("nr_periods", 0),
        nr_throttled=stat.get("nr_throttled", 0),
        throttled_s=throttled,
        usage_s=usage,
    )


@dataclass(frozen=True)
class MemoryStat:
    """Memory readings alike for cgroup v1 and v2; ``working_set`` is what an OOM kill counts."""

    current: int | None
    working_set: int | None
    events: dict[str, int]
    swap_current: int | None
    swap_max: int | None


def memory_stat(paths: CgroupPaths, where: Path | None) -> MemoryStat | None:
    d = where or paths.memory
    if d is None:
        return None
    current_text = _read(d / "memory.current")
    v2 = current_text is not None
    if not v2:
        current_text = _read(d / "memory.usage_in_bytes")
    if current_text is None:
        return None
    current = int(current_text)
    stat = _kv(_read(d / "memory.stat"))
    inactive = stat.get("inactive_file" if v2 else "total_inactive_file", 0)
    if v2:
        events = _kv(_read(d / "memory.events"))
        swap_current = _int(_read(d / "memory.swap.current"))
        swap_max = _int(_read(d / "memory.swap.max"))
    else:
        oom = _kv(_read(d / "memory.oom_control"))
        events = {"oom_kill": oom.get("oom_kill", 0)}
        failcnt = _int(_read(d / "memory.failcnt"))
        if failcnt is not None:
            events["max"] = failcnt
        memsw = _int(_read(d / "memory.memsw.usage_in_bytes"))
        swap_current = memsw - current if memsw is not None else None
        swap_max = None
    return MemoryStat(
        current=current,
        working_set=max(0, current - inactive),
        events=events,
        swap_current=swap_current,
        swap_max=swap_max,
    )


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.lstrip("-").isdigit() else None


def parse_pressure(text: str | None) -> dict[str, float]:
    """``some``/``full`` avg10 in percent, and their ``total`` stall time in seconds."""
    out: dict[str, float] = {}
    for line in (text or "").splitlines():
        kind, _, rest = line.partition(" ")
        for item in rest.split():
            k, _, v = item.partition("=")
            try:
                if k == "avg10":
                    out[f"{kind}_avg10"] = float(v)
                elif k == "total":
                    out[f"{kind}_total_s"] = int(v) / 1e6
            except ValueError:
                continue
    return out


def pressure(
    paths: CgroupPaths, proc_root: Path = Path("/proc")
) -> tuple[str, dict[str, dict[str, float]]]:
    """PSI per resource, from the target's v2 cgroup when it has it, else system-wide."""
    if paths.unified is not None and (paths.unified / "cpu.pressure").exists():
        scope, base = "cgroup", paths.unified
        files = {r: base / f"{r}.pressure" for r in ("cpu", "memory", "io")}
    else:
        scope = "system"
        files = {r: proc_root / "pressure" / r for r in ("cpu", "memory", "io")}
    data = {r: parse_pressure(_read(f)) for r, f in files.items()}
    if not any(data.values()):
        return "none", {}
    return scope, data


def affinity_cpus(pid: int) -> int | None:
    try:
        return len(os.sched_getaffinity(pid))
    except OSError:
        return None
