"""What the host does for the attached process tree: processes, threads, cgroup, pressure.

As for GPUs, a value that could not be read is None and its name is a key of ``na`` with the
reason ("needs same user or root"). Rates are per second over the last interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

_NONE: Mapping[str, str] = MappingProxyType({})

DATALOADER_WORKER = "pt_data_worker"

MAIN, RANK, WORKER, CHILD = "main", "rank", "worker", "child"
"""The roles of a process in the attached tree (``roles``)."""


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """One thread as /proc shows it; a process's running and disk-wait counts come from these."""

    tid: int
    name: str
    state: str
    """R running, S sleeping, D disk wait (uninterruptible), Z zombie, T stopped, ..."""
    cpu_cores: float | None


@dataclass(frozen=True, slots=True)
class ProcSample:
    """One process of the attached tree, so a DataLoader worker is seen apart from the target."""

    pid: int
    start_ticks: int
    ppid: int
    name: str
    cmdline: str
    role: str
    """main (the target), rank (a training process a launcher started: ``roles``), worker
    (a DataLoader worker), or child (anything else below it)."""
    state: str
    cpu_cores: float | None
    rss_bytes: int | None
    uss_bytes: int | None
    pss_bytes: int | None
    num_threads: int
    threads_running: int | None
    threads_disk_wait: int | None
    threads: tuple[ThreadInfo, ...]
    runq_wait: float | None
    """Seconds spent waiting for a CPU per second, summed over the threads: 2.0 means on
    average two threads were ready to run but had no CPU."""
    ctx_voluntary_rate: float | None
    ctx_involuntary_rate: float | None
    read_chars_rate: float | None
    read_bytes_rate: float | None
    write_bytes_rate: float | None
    open_fds: int | None
    na: Mapping[str, str] = field(default_factory=lambda: _NONE)
    rank: int | None = None
    """The global rank when known (its agent, its launcher's variables, or spawn order); for
    ranks, and for a target that is itself one rank of a job."""
    local_rank: int | None = None
    world_size: int | None = None
    kernel_cores: float | None = None
    """The part of ``cpu_cores`` spent in the kernel (system time): syscalls such as opening and
    reading files. A loader that reads many small files spends most of its CPU here."""
    main_thread_cores: float | None = None
    """CPU of the process's main thread alone (tid = pid), to the nanosecond: a thread blocked
    for good uses none; one that wakes for each batch of a slow loader uses a few ms a second."""


@dataclass(frozen=True, slots=True)
class CgroupSample:
    """What the target's cgroup allows it, and its use: often far less than the machine has."""

    version: str
    cpu_quota_cpus: float | None
    cpu_quota_path: str | None
    cpu_usage_cores: float | None
    throttled_ratio: float | None
    """Share of CFS periods in which the cgroup was throttled, over the last interval."""
    throttled_s_per_s: float | None
    mem_limit_bytes: int | None
    mem_limit_path: str | None
    mem_current_bytes: int | None
    mem_working_set_bytes: int | None
    """Usage minus inactive page cache: what counts toward an OOM kill."""
    mem_events: Mapping[str, int]
    mem_events_new: Mapping[str, int]
    """Events since the previous reading (high, max, oom, oom_kill)."""
    swap_bytes: int | None
    psi_scope: str
    """cgroup (v2, this cgroup's own), system (/proc/pressure), or none."""
    psi: Mapping[str, Mapping[str, float]]
    """resource -> some_avg10 / full_avg10 (percent)."""
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LockWait:
    """A process of the job blocked on a file lock, and who holds that lock (/proc/locks)."""

    waiter: int
    """The job's process that waits (pid)."""
    kind: str
    """FLOCK, POSIX or OFDLCK, as /proc/locks names it."""
    holder: int | None
    """The holder's pid (None: an open-file-description lock, which has no owning pid)."""
    holder_cmd: str
    """Its command line (bounded, printable), "" when unreadable."""
    holder_in_job: bool
    """The holder is a process of the attached tree."""
    path: str | None
    """The locked file, from the waiter's open files (None: not found among them)."""


@dataclass(frozen=True, slots=True)
class Sharer:
    """A busy process outside the job, read while the job waits for CPUs
    (``sources/sharers.py``): what may take them."""

    pid: int
    name: str
    cmdline: str
    """Bounded and printable: another user's command line is only shown."""
    cores: float
    """CPU it used between the last two scans (cores)."""
    cpus: tuple[int, ...] | None
    """The CPUs it may run on (its affinity); None when unreadable."""
    shares_with: tuple[int, ...] = ()
    """The job's processes waiting for CPUs whose allowed CPUs overlap its own (all of them
    when either affinity is unreadable)."""


@dataclass(frozen=True, slots=True)
class HostSample:
    """One reading of what the host gives the attached tree: the host's side of the evidence."""

    pid: int
    t: float
    wall: float
    state: str
    """running, or exited (the target is gone; ``exit_code`` when gputop launched it)."""
    exit_code: int | None
    processes: tuple[ProcSample, ...]
    effective_cpus: float | None
    effective_cpus_source: str
    affinity_cpus: int | None
    cgroup: CgroupSample | None
    env: Mapping[str, str]
    na: Mapping[str, str] = field(default_factory=lambda: _NONE)
    lock_waits: tuple[LockWait, ...] = ()
    """Processes of the tree blocked on a file lock, with its holder (``sources/locks.py``)."""
    sharers: tuple[Sharer, ...] = ()
    """The busiest processes outside the job while it waits for CPUs (``sources/sharers``)."""

    @property
    def key(self) -> tuple[str, int]:
        return ("host", self.pid)

    @property
    def main(self) -> ProcSample | None:
        return next((p for p in self.processes if p.role == MAIN), None)

    @property
    def workers(self) -> tuple[ProcSample, ...]:
        return tuple(p for p in self.processes if p.role == WORKER)

    @property
    def ranks(self) -> tuple[ProcSample, ...]:
        return tuple(p for p in self.processes if p.role == RANK)

    @property
    def threads_running(self) -> int | None:
        counts = [p.threads_running for p in self.processes if p.threads_running is not None]
        return sum(counts) if counts else None

    @property
    def runq_wait(self) -> float | None:
        waits = [p.runq_wait for p in self.processes if p.runq_wait is not None]
        return sum(waits) if waits else None

    @property
    def cpu_cores(self) -> float | None:
        cores = [p.cpu_cores for p in self.processes if p.cpu_cores is not None]
        return sum(cores) if cores else None


# ---- roles: which process of the tree is what ----

LAUNCHERS: tuple[tuple[str, str, str, str], ...] = (
    # (launcher, rank, local rank, world size): the most specific first, so torchrun under
    # srun names its own ranks, not the srun task they share
    ("torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE"),  # also accelerate, DeepSpeed
    ("mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("mpi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),  # MPICH, Intel MPI
    ("slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
)
RANK_VARIABLES: tuple[str, ...] = tuple(
    dict.fromkeys([v for row in LAUNCHERS for v in row[1:]] + ["NODE_RANK", "TORCHELASTIC_RUN_ID"])
)
"""The environment variables the role rule reads (the sources keep only these)."""


@dataclass(frozen=True, slots=True)
class RankId:
    """A rank's number, as far as it is known, and where it was learnt."""

    rank: int | None
    local_rank: int | None = None
    world_size: int | None = None
    source: str = ""
    """torchrun, lightning, mpi, slurm (its variables), agent, spawn order (an inference)."""


def _int(v: str | None) -> int | None:
    v = (v or "").strip()
    return int(v) if v.isdigit() and len(v) < 10 else None


def rank_from_env(env: Mapping[str, str]) -> RankId | None:
    """The rank a launcher's variables give a process, None without any. Lightning's
    children carry LOCAL_RANK and NODE_RANK but no RANK: their rank is the local rank on
    node 0 and unknown elsewhere."""
    for launcher, rank, local, world in LAUNCHERS:
        if _int(env.get(rank)) is not None:
            return RankId(_int(env[rank]), _int(env.get(local)), _int(env.get(world)), launcher)
    local_rank = _int(env.get("LOCAL_RANK"))
    if local_rank is not None:
        node = _int(env.get("NODE_RANK"))
        rank_ = local_rank if not node else None
        return RankId(rank_, local_rank, _int(env.get("WORLD_SIZE")), "lightning")
    return None


@dataclass(frozen=True, slots=True)
class ProcFacts:
    """What the role rule reads about one process of the tree (the sources read /proc)."""

    pid: int
    start_ticks: int
    ppid: int
    comm: str
    cmdline: str
    env: Mapping[str, str] | None
    """Its launcher variables (``RANK_VARIABLES`` only); None when they could not be read."""


@dataclass(frozen=True, slots=True)
class RoleHint:
    """Evidence about a process from outside /proc: its stack (in torch's ``_worker_loop``:
    a worker; in ``torch.multiprocessing.spawn``'s ``_wrap``: a rank) or its agent (a rank,
    with its number)."""

    role: str
    rank: RankId | None = None


def merge_hints(*hints: Mapping[int, RoleHint]) -> dict[int, RoleHint]:
    """Several sources' hints as one: a worker's stack beats any rank claim (an agent in a
    spawned worker inherits its rank's variables), a rank with its number beats one without."""
    out: dict[int, RoleHint] = {}
    for given in hints:
        for pid, h in given.items():
            old = out.get(pid)
            if old is None or (old.role != WORKER and (h.role == WORKER or old.rank is None)):
                out[pid] = h
    return out


def _python_made(p: ProcFacts, parent: ProcFacts | None) -> bool:
    """Made by its Python parent from its own interpreter: forked (the same command line, also
    what a forkserver forks) or started by multiprocessing's spawn (the forkserver itself is
    neither)."""
    if parent is None or "python" not in parent.cmdline.split(" ")[0]:
        return False
    return p.cmdline == parent.cmdline or "multiprocessing.spawn" in p.cmdline


def _one_process_per_rank(
    out: dict[int, tuple[str, RankId | None]], by_pid: Mapping[int, ProcFacts]
) -> None:
    """Of the processes that claim one rank number, the first started keeps it."""
    claims: dict[int, list[int]] = {}
    for pid, (role, rank) in out.items():
        if role == RANK and rank is not None and rank.rank is not None and pid in by_pid:
            claims.setdefault(rank.rank, []).append(pid)
    for pids in claims.values():
        first = min(pids, key=lambda pid: (by_pid[pid].start_ticks, pid))
        for pid in pids:
            if pid != first:
                out[pid] = (CHILD, None)


ANCESTRY_MAX = 64
"""Parents walked up from a process to find the rank that started it (a tree is shallower)."""


def rank_above(pid: int, parent: Mapping[int, int], ranks: Mapping[int, int]) -> int | None:
    """The rank number of the nearest ancestor of ``pid`` that is a rank (``ranks``: pid ->
    number), or None: a helper a rank started is "a child of rank N", never rank N."""
    seen = pid
    for _ in range(ANCESTRY_MAX):
        up = parent.get(seen)
        if up is None or up == seen:
            return None
        if up in ranks:
            return ranks[up]
        seen = up
    return None


def roles(
    facts: Sequence[ProcFacts], target: int, hints: Mapping[int, RoleHint] | None = None
) -> dict[int, tuple[str, RankId | None]]:
    """pid -> (role, rank) for the tree below ``target``. The rule, first match:

    - the target is main (with a rank only when it is one itself: no rank below it);
    - a DataLoader worker by torch's name for it (``pt_data_worker``, torch >= 2.4) or its
      stack in ``_worker_loop``: never for being a spawned child;
    - a rank when its agent says so, when a launcher set rank variables for it (they differ
      from its parent's: a worker or helper that inherited its rank's are not a rank), when
      its stack is in ``torch.multiprocessing.spawn``'s ``_wrap``, or when its Python parent
      made it (spawn, forkserver, fork) and it has DataLoader workers of its own;
    - anything else is a child (sampled like a rank, shown apart; a spawned DataLoader
      worker is one for the few seconds before torch names it);
    - one rank number is one process: of several that claim it (a helper a rank started that
      outlived it and was adopted higher up keeps its rank's variables, and its agent reports
      them), the first started is the rank, the others are children.

    Ranks with no number from their agent or variables are numbered in the order their
    parent started them (``torch.multiprocessing.spawn`` starts rank i i-th)."""
    hints = hints or {}
    by_pid = {f.pid: f for f in facts}

    def worker(f: ProcFacts) -> bool:
        h = hints.get(f.pid)
        return f.comm.startswith(DATALOADER_WORKER) or (h is not None and h.role == WORKER)

    owners = {f.ppid for f in facts if f.pid != target and worker(f)}
    out: dict[int, tuple[str, RankId | None]] = {}
    for f in facts:
        if f.pid == target:
            continue
        parent = by_pid.get(f.ppid)
        h = hints.get(f.pid)
        env = rank_from_env(f.env) if f.env else None
        if worker(f):
            out[f.pid] = (WORKER, None)
        elif h is not None and h.rank is not None:
            out[f.pid] = (RANK, h.rank)
        elif env is not None and (parent is None or parent.env is None or parent.env != f.env):
            out[f.pid] = (RANK, env)
        elif (h is not None and h.role == RANK) or (f.pid in owners and _python_made(f, parent)):
            out[f.pid] = (RANK, None)
        else:
            out[f.pid] = (CHILD, None)
    _one_process_per_rank(out, by_pid)
    unnumbered: dict[int, list[ProcFacts]] = {}
    for f in facts:
        if out.get(f.pid) == (RANK, None):
            unnumbered.setdefault(f.ppid, []).append(f)
    for kids in unnumbered.values():
        for i, f in enumerate(sorted(kids, key=lambda f: (f.start_ticks, f.pid))):
            out[f.pid] = (RANK, RankId(i, i, None, "spawn order"))
    main = by_pid.get(target)
    if main is not None:
        h = hints.get(target)
        own = h.rank if h is not None and h.rank is not None else None
        if own is None and main.env and not any(r == RANK for r, _ in out.values()):
            own = rank_from_env(main.env)
        out[target] = (MAIN, own)
    return out
