"""Which process of the attached tree is what: the target, a rank a launcher started, a
DataLoader worker, or another child. The launchers' variables, the hints a launcher or the
agent gives, and the algorithm that weighs them; apart from the samples they label."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DATALOADER_WORKER = "pt_data_worker"

MAIN, RANK, WORKER, CHILD = "main", "rank", "worker", "child"
"""The roles of a process in the attached tree (``roles``)."""


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
