"""The host source: the attached process and its descendants, their threads, their cgroup.

Cost tiers (docs/facts/host-signals.md, "Read costs"): every tick, each process's stat and
io, every task's schedstat (run-queue wait) of the main process, ranks and children, the cgroup
counters and PSI; every few seconds, the per-thread stat and status files (thread states,
per-thread CPU, context switches summed over all tasks), open fds, a DataLoader worker's
schedstat (an 8-rank job has 64 of them: per-process numbers are all that is shown of them,
and no context switches are read for them) and the tree (``ProcTree``, shared); rarely,
smaps_rollup (USS/PSS), environ and the cgroup paths. Processes are identified by (pid, start
time), so a reused PID is new. Each process's command line and launcher variables are read
once, when it is first seen, and its role (main, rank, worker, child: ``model.roles.roles``)
settled again at each walk.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from gputop.model.host import CgroupSample, HostSample, ProcSample, ThreadInfo
from gputop.model.roles import CHILD, MAIN, RANK, WORKER, RankId, RoleHint, roles
from gputop.sources import cgroup as cg
from gputop.sources.locks import lock_waits, read_locks
from gputop.sources.proc_tree import ProcTree
from gputop.sources.procfs import (
    GONE_STATES,
    parse_ctx_switches,
    parse_environ,
    parse_io,
    parse_schedstat,
    parse_smaps_rollup,
    parse_stat,
    read_bytes,
    read_cmdline,
)
from gputop.sources.sharers import CROWDED_RUNQ, SharerScan
from gputop.sources.target import TargetId

ENV_KEYS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
)
DENIED = "n/a (needs same user or root)"
CPU_RATE_MIN_S = 0.2
"""The shortest interval a CPU rate is taken over: /proc/P/stat counts 10-ms ticks, so a busy
process read twice within a few ms uses "0.00 cores" (and the job looks idle)."""
THREAD_TIER_S = 3.0
SLOW_TIER_S = 30.0
IDLE_WORKER_CORES = 0.05
"""A DataLoader worker using less CPU than this is waiting on its index queue (its threads
sleep: a GPU-bound rank's loader has its batches ready): it is read IDLE_WORKER_SLOWER times
less often, every 12 s; a worker that starts working is seen busy at the next reading."""
IDLE_WORKER_SLOWER = 4.0
WORKER_MEMORY_SLOWER = 10.0
"""A DataLoader worker's USS/PSS is read this many slow tiers apart: smaps_rollup walks the
page tables (~5 ms of kernel CPU for a process that imported torch, and a forked worker maps
what its rank did), so 64 workers at the slow tier alone cost 1% of a core."""


@dataclass
class _Proc:
    pid: int
    start: int
    role: str
    name: str
    cmdline: str
    rank: RankId | None = None
    cpu_prev: tuple[float, float, float] | None = None
    """(when, CPU seconds, of them in the kernel) at the previous reading."""
    sched_prev: dict[int, float] = field(default_factory=dict)
    main_cpu_prev: float | None = None
    main_t: float = 0.0
    sched_t: float | None = None
    thread_cpu_prev: dict[int, float] = field(default_factory=dict)
    thread_t: float | None = None
    ctx_prev: tuple[float, int, int] | None = None
    io_prev: tuple[float, int, int, int] | None = None
    denied: dict[str, str] = field(default_factory=dict)
    threads: tuple[ThreadInfo, ...] = ()
    threads_running: int | None = None
    threads_disk_wait: int | None = None
    ctx_rates: tuple[float | None, float | None] = (None, None)
    open_fds: int | None = None
    uss: int | None = None
    pss: int | None = None
    slow_t: float | None = None
    runq: float | None = None
    """Run-queue wait over every task at the last thread-tier reading."""
    main_cores: float | None = None
    last: ProcSample | None = None
    """What it read last: a DataLoader worker's, shown again between thread-tier readings."""


class HostSource:
    """``HostSource.open(pid)``, then ``sample()`` every tick."""

    def __init__(
        self,
        pid: int,
        proc_root: Path = Path("/proc"),
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        exit_code: Callable[[], int | None] | None = None,
        mountinfo: Path | None = None,
        thread_tier_s: float = THREAD_TIER_S,
        slow_tier_s: float = SLOW_TIER_S,
        hints: Callable[[], Mapping[int, RoleHint]] | None = None,
        tree: ProcTree | None = None,
    ) -> None:
        """``hints``: role evidence from other sources (``StackSource.hints``,
        ``AgentLink.hints``, merged by ``merge_hints``), asked at each walk of the tree
        (``commands/target.attach`` builds the sources in that order). ``tree``: the walk of
        /proc shared with the other sources (its own otherwise, walked at the thread tier)."""
        self.pid = pid
        self.proc = proc_root
        self._root = str(proc_root)
        self._clock = clock
        self._wall = wall
        self._exit_code = exit_code
        self._mountinfo = mountinfo
        self.thread_tier_s = thread_tier_s
        self.slow_tier_s = slow_tier_s
        self._procs: dict[tuple[int, int], _Proc] = {}
        self.tree = tree or ProcTree(pid, self._root, clock)
        self.sharers = SharerScan(self._root)
        self.hints = hints
        self._start: int | None = None
        self.identity: TargetId | None = None
        """The target as opened (``open``): the other sources and the keys follow it."""
        self._children_t: float | None = None
        self._slow_t: float | None = None
        self._cgroup_paths: cg.CgroupPaths | None = None
        self._cgroup_file: bytes | None = None
        self._cpu_prev: tuple[float, cg.CpuStat] | None = None
        self._mem_events_prev: dict[str, int] = {}
        self._env: dict[str, str] = {}
        self._na: dict[str, str] = {}
        self.exited = False

    @classmethod
    def open(cls, pid: int, identity: TargetId | None = None, **kwargs) -> HostSource:
        """``identity``: the target as the other sources follow it (read here without one)."""
        source = cls(pid, **kwargs)
        source.identity = identity or TargetId.of(pid, source._root)  # TargetNotFound: 1 line
        if source.tree.identity is None:
            source.tree.identity = source.identity
        source._start = source.identity.start_ticks
        return source

    # ---- small readers ---------------------------------------------------------------------

    def _path(self, *parts: object) -> str:
        """A /proc path as a plain string: pathlib costs more than the read itself here."""
        return "/".join((self._root, *map(str, parts)))

    @staticmethod
    def _slurp(path: str) -> str:
        return read_bytes(path).decode(errors="replace")

    @staticmethod
    def _slurp_bytes(path: str) -> bytes:
        return read_bytes(path)

    def _stat(self, pid: int, tid: int | None = None):
        path = self._path(pid, "task", tid, "stat") if tid else self._path(pid, "stat")
        try:
            return parse_stat(self._slurp(path))
        except (OSError, ValueError, IndexError):
            return None

    def _tasks(self, pid: int) -> list[int]:
        try:
            return [int(t) for t in os.listdir(self._path(pid, "task"))]
        except OSError:
            return []

    # ---- the tree ---------------------------------------------------------------------------

    def _discover(self) -> None:
        """Walk the tree below the target; keep known processes, add new ones, and settle
        every process's role again (``roles``: a worker names itself after it starts, a
        rank's workers and its agent or stack appear later)."""
        facts = self.tree.facts(self.thread_tier_s)
        settled = roles(facts, self.pid, self.hints() if self.hints else None)
        seen: dict[tuple[int, int], _Proc] = {}
        for f in facts:
            key = (f.pid, f.start_ticks)
            proc = self._procs.get(key)
            if proc is None:
                proc = _Proc(pid=f.pid, start=f.start_ticks, role=CHILD, name=f.comm,
                             cmdline=f.cmdline)  # fmt: skip
            proc.role, proc.rank = settled.get(f.pid, (CHILD, None))
            seen[key] = proc
        self._procs = seen

    # ---- one tick ----------------------------------------------------------------------------

    def sample(self) -> HostSample:
        now, wall = self._clock(), self._wall()
        main = self._stat(self.pid)
        if main is None or main.start_ticks != self._start or main.state in GONE_STATES:
            return self._exited(now, wall)
        if self._children_t is None or now - self._children_t >= self.thread_tier_s:
            self._discover()
            self._children_t = now
            moved = self._moved()  # a launcher or systemd moved it: follow within a tier
            if moved:
                self._slow_t = None
        slow = self._slow_t is None or now - self._slow_t >= self.slow_tier_s
        if slow:
            self._slow_t = now
            self._refresh_slow()
        procs = []
        for key, proc in list(self._procs.items()):
            sample = self._sample_proc(proc, now)
            if sample is None:
                del self._procs[key]  # gone between two reads: dropped quietly
                continue
            procs.append(sample)
        procs.sort(key=_order)
        affinity = cg.affinity_cpus(self.pid)
        cgroup = self._cgroup(now)
        effective, source = _effective_cpus(affinity, cgroup)
        return HostSample(
            pid=self.pid,
            t=now,
            wall=wall,
            state="running",
            exit_code=None,
            processes=tuple(procs),
            effective_cpus=effective,
            effective_cpus_source=source,
            affinity_cpus=affinity,
            cgroup=cgroup,
            env=MappingProxyType(dict(self._env)),
            na=MappingProxyType(dict(self._na)),
            lock_waits=lock_waits(
                {p.pid for p in procs},
                lambda pid: read_cmdline(pid, self._root),
                read_locks(self._path("locks")),
                self._root,
            ),
            sharers=self.sharers.read(
                {p.pid for p in procs},
                {
                    p.pid
                    for p in procs
                    if p.role in (MAIN, RANK) and (p.runq_wait or 0.0) >= CROWDED_RUNQ
                },
                now,
            ),
        )

    def _exited(self, now: float, wall: float) -> HostSample:
        # one last look at the cgroup, which outlives the target: an OOM kill that ended the
        # job shows only there
        last = None
        if not self.exited:
            try:
                last = self._cgroup(now)
            except OSError:
                last = None
        self.exited = True
        code = self._exit_code() if self._exit_code else None
        return HostSample(
            pid=self.pid, t=now, wall=wall, state="exited", exit_code=code, processes=(),
            effective_cpus=None, effective_cpus_source="", affinity_cpus=None, cgroup=last,
            env=MappingProxyType(dict(self._env)), na=MappingProxyType({}),
        )  # fmt: skip

    def _moved(self) -> bool:
        """Whether the target's /proc/PID/cgroup changed since the last look (one small read
        a thread tier): its cgroup's paths are then resolved again at once."""
        try:
            now = read_bytes(self._path(self.pid, "cgroup"))
        except OSError:
            return False
        was, self._cgroup_file = self._cgroup_file, now
        return was is not None and was != now

    def _refresh_slow(self) -> None:
        self._cgroup_paths = cg.resolve(self.pid, self.proc, self._mountinfo)
        try:
            env = parse_environ(self._slurp_bytes(self._path(self.pid, "environ")))
            self._env = {k: env[k] for k in ENV_KEYS if k in env}
            self._na.pop("env", None)
        except PermissionError:
            self._na["env"] = DENIED
        except OSError:
            pass

    def _sample_proc(self, p: _Proc, now: float) -> ProcSample | None:
        """One process's numbers. A DataLoader worker's are read at the thread tier only (64
        workers read every tick were most of this source's cost, and its rates over 3 s say
        what the panes and the rules use), an idle one's less often still
        (``IDLE_WORKER_CORES``): in between, its last reading stands."""
        worker = p.role == WORKER
        if (
            worker
            and p.last is not None
            and p.last.role == WORKER
            and p.last.rank == (p.rank.rank if p.rank else None)
            and p.thread_t is not None
            and now - p.thread_t < self._worker_gap(p.last.cpu_cores, p.last)
        ):
            return p.last
        st = self._stat(p.pid)
        if st is None or st.start_ticks != p.start:
            return None
        cpu = kernel = None
        if p.cpu_prev is None:
            p.cpu_prev = (now, st.cpu_s, st.sys_s)
        elif now - p.cpu_prev[0] >= CPU_RATE_MIN_S:
            cpu = max(0.0, (st.cpu_s - p.cpu_prev[1]) / (now - p.cpu_prev[0]))
            kernel = max(0.0, (st.sys_s - p.cpu_prev[2]) / (now - p.cpu_prev[0]))
            p.cpu_prev = (now, st.cpu_s, st.sys_s)
        # else: too soon to say (the first look at a target is followed within milliseconds
        # by the first tick): unknown, and the next reading measures from the earlier one
        # a worker is read whole or not at all (the gap was decided above, once)
        tier = worker or p.thread_t is None or now - p.thread_t >= self.thread_tier_s
        if tier:  # every thread at the thread tier
            tasks = self._tasks(p.pid)
            self._schedstat(p, tasks, now)
            self._threads(p, tasks, now)
        elif not worker:  # the main thread's CPU at each tick
            self._schedstat(p, None, now)
        runq, main_thread = p.runq, p.main_cores
        reads = self._io(p, now)
        slow = self.slow_tier_s * (WORKER_MEMORY_SLOWER if p.role == WORKER else 1.0)
        if p.slow_t is None or now - p.slow_t >= slow:
            p.slow_t = now
            self._memory(p)
        p.last = ProcSample(
            pid=p.pid,
            start_ticks=p.start,
            ppid=st.ppid,
            name=st.comm,
            cmdline=p.cmdline,
            role=p.role,
            state=st.state,
            cpu_cores=cpu,
            kernel_cores=kernel,
            main_thread_cores=main_thread,
            rss_bytes=st.rss_bytes,
            uss_bytes=p.uss,
            pss_bytes=p.pss,
            num_threads=st.num_threads,
            threads_running=p.threads_running,
            threads_disk_wait=p.threads_disk_wait,
            threads=p.threads,
            runq_wait=runq,
            ctx_voluntary_rate=p.ctx_rates[0],
            ctx_involuntary_rate=p.ctx_rates[1],
            read_chars_rate=reads[0],
            read_bytes_rate=reads[1],
            write_bytes_rate=reads[2],
            open_fds=p.open_fds,
            na=MappingProxyType(dict(p.denied)),
            rank=p.rank.rank if p.rank else None,
            local_rank=p.rank.local_rank if p.rank else None,
            world_size=p.rank.world_size if p.rank else None,
        )
        return p.last

    def _worker_gap(self, cores: float | None, last: ProcSample | None) -> float:
        """Seconds between readings of a DataLoader worker using ``cores`` (``last``: its last
        reading): the thread tier, IDLE_WORKER_SLOWER times that while it is idle (its threads
        sleep on its queue; one waiting for the disk uses little CPU and is not idle)."""
        idle = (
            cores is not None
            and cores < IDLE_WORKER_CORES
            and (last is None or (last.state != "D" and not last.threads_disk_wait))
        )
        return self.thread_tier_s * (IDLE_WORKER_SLOWER if idle else 1.0)

    def _schedstat(self, p: _Proc, tasks: list[int] | None, now: float) -> None:
        """The run-queue wait per second summed over ``tasks`` (None: the main thread alone
        this tick; every task's at the thread tier: a torch rank has dozens) and the main
        thread's CPU in cores, into ``p``. Tasks that came or went add nothing. The main thread
        (tid = pid) is read from schedstat's nanosecond clock: a thread that wakes for each
        batch of a slow loader uses a few ms a second, which stat's 10-ms ticks cannot tell
        from a blocked thread's none."""
        current: dict[int, float] = {}
        main_cpu = None
        for tid in tasks if tasks is not None else (p.pid,):
            try:
                cpu_s, wait_s = parse_schedstat(
                    self._slurp(self._path(p.pid, "task", tid, "schedstat"))
                )
            except (OSError, ValueError, IndexError):
                continue
            current[tid] = wait_s
            if tid == p.pid:
                main_cpu = cpu_s
        if tasks is not None:
            if p.sched_t is not None and now > p.sched_t:
                delta = sum(
                    max(0.0, v - p.sched_prev[t]) for t, v in current.items() if t in p.sched_prev
                )
                p.runq = delta / (now - p.sched_t)
            p.sched_prev, p.sched_t = current, now
        p.main_cores = None
        if main_cpu is not None and p.main_cpu_prev is not None and now > p.main_t:
            p.main_cores = max(0.0, main_cpu - p.main_cpu_prev) / (now - p.main_t)
        p.main_cpu_prev, p.main_t = main_cpu, now

    def _threads(self, p: _Proc, tasks: list[int], now: float) -> None:
        infos = []
        cpu_now: dict[int, float] = {}
        vol = invol = 0
        # denied once: not asked again; a DataLoader worker's context switches are not read
        # (nothing shows them: its per-process numbers are what the panes and rules use)
        status_ok = "ctx_voluntary_rate" not in p.denied and p.role != WORKER
        dt = now - p.thread_t if p.thread_t is not None else None
        for tid in tasks:
            st = self._stat(p.pid, tid)
            if st is None:
                continue
            cpu_now[tid] = st.cpu_s
            prev = p.thread_cpu_prev.get(tid)
            cores = (st.cpu_s - prev) / dt if dt and prev is not None else None
            infos.append(ThreadInfo(tid=tid, name=st.comm, state=st.state, cpu_cores=cores))
            if status_ok:
                try:
                    v, i = parse_ctx_switches(self._slurp(self._path(p.pid, "task", tid, "status")))
                    vol, invol = vol + v, invol + i
                except PermissionError:
                    status_ok = False
                except OSError:
                    continue
        p.threads = tuple(infos)
        p.threads_running = sum(1 for t in infos if t.state == "R")
        p.threads_disk_wait = sum(1 for t in infos if t.state == "D")
        p.thread_cpu_prev = cpu_now
        if "ctx_voluntary_rate" in p.denied or p.role == WORKER:
            pass
        elif status_ok:
            if p.ctx_prev is not None and dt:
                p.ctx_rates = (
                    max(0.0, (vol - p.ctx_prev[1]) / dt),
                    max(0.0, (invol - p.ctx_prev[2]) / dt),
                )
            p.ctx_prev = (now, vol, invol)
        else:
            for k in ("ctx_voluntary_rate", "ctx_involuntary_rate"):
                p.denied[k] = DENIED
        p.thread_t = now
        if "open_fds" not in p.denied:
            try:
                p.open_fds = len(os.listdir(self._path(p.pid, "fd")))
            except PermissionError:
                p.denied["open_fds"] = DENIED
            except OSError:
                p.open_fds = None

    def _io(self, p: _Proc, now: float) -> tuple[float | None, float | None, float | None]:
        if "read_chars_rate" in p.denied:
            return None, None, None
        try:
            io = parse_io(self._slurp(self._path(p.pid, "io")))
        except PermissionError:
            for k in ("read_chars_rate", "read_bytes_rate", "write_bytes_rate"):
                p.denied[k] = DENIED
            return None, None, None
        except OSError:
            return None, None, None
        cur = (now, io.get("rchar", 0), io.get("read_bytes", 0), io.get("write_bytes", 0))
        prev, p.io_prev = p.io_prev, cur
        if prev is None or now <= prev[0]:
            return None, None, None
        dt = now - prev[0]
        return tuple(max(0.0, (c - o) / dt) for c, o in zip(cur[1:], prev[1:], strict=True))  # type: ignore[return-value]

    def _memory(self, p: _Proc) -> None:
        if "uss_bytes" in p.denied:
            return
        try:
            rollup = parse_smaps_rollup(self._slurp(self._path(p.pid, "smaps_rollup")))
            p.uss, p.pss = rollup["uss"], rollup["pss"]
        except PermissionError:
            p.denied["uss_bytes"] = p.denied["pss_bytes"] = DENIED
        except OSError:
            pass

    def _cgroup(self, now: float) -> CgroupSample | None:
        paths = self._cgroup_paths
        if paths is None or paths.version in ("unknown", "none"):
            return None
        quota = cg.cpu_quota(paths)
        limit = cg.memory_limit(paths)
        cpu = cg.cpu_stat(paths, quota.path if quota else None)
        usage = ratio = throttled = None
        if cpu is not None and self._cpu_prev is not None:
            t0, c0 = self._cpu_prev
            dt = now - t0
            periods = cpu.nr_periods - c0.nr_periods
            if periods > 0:
                ratio = (cpu.nr_throttled - c0.nr_throttled) / periods
            elif dt > 0:
                ratio = 0.0 if quota else None
            if dt > 0:
                throttled = max(0.0, (cpu.throttled_s - c0.throttled_s) / dt)
                if cpu.usage_s is not None and c0.usage_s is not None:
                    usage = max(0.0, (cpu.usage_s - c0.usage_s) / dt)
        if cpu is not None:
            self._cpu_prev = (now, cpu)
        mem = cg.memory_stat(paths, limit.path if limit else None)
        events = dict(mem.events) if mem else {}
        new = {k: max(0, v - self._mem_events_prev.get(k, v)) for k, v in events.items()}
        self._mem_events_prev = events
        scope, psi = cg.pressure(paths, self.proc)
        return CgroupSample(
            version=paths.version,
            cpu_quota_cpus=quota.value if quota else None,
            cpu_quota_path=str(quota.path) if quota else None,
            cpu_usage_cores=usage,
            throttled_ratio=ratio,
            throttled_s_per_s=throttled,
            mem_limit_bytes=int(limit.value) if limit else None,
            mem_limit_path=str(limit.path) if limit else None,
            mem_current_bytes=mem.current if mem else None,
            mem_working_set_bytes=mem.working_set if mem else None,
            mem_events=MappingProxyType(events),
            mem_events_new=MappingProxyType(new),
            swap_bytes=mem.swap_current if mem else None,
            psi_scope=scope,
            psi=MappingProxyType({r: MappingProxyType(v) for r, v in psi.items()}),
            problems=paths.problems,
        )


def _order(p: ProcSample) -> tuple:
    """main, ranks by number, workers, children; by pid within each (as before ranks)."""
    order = (MAIN, RANK, WORKER).index(p.role) if p.role in (MAIN, RANK, WORKER) else 3
    return (order, p.rank if p.role == RANK and p.rank is not None else -1, p.pid)


def _effective_cpus(affinity: int | None, cgroup: CgroupSample | None) -> tuple[float | None, str]:
    quota = cgroup.cpu_quota_cpus if cgroup else None
    if quota is not None and (affinity is None or quota < affinity):
        return quota, "cgroup quota"
    if affinity is not None:
        total = os.cpu_count()
        return float(affinity), "CPU affinity" if total and affinity < total else "all CPUs"
    return None, "unknown"
