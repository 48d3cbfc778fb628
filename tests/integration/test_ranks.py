"""Ranks from any launcher, seen from outside: plain jobs (no gputop code) started by
torch.multiprocessing.spawn or torchrun, and ranks an MPI or SLURM launcher marks only in
their environment, attached to by PID."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from tests_support import free_port, kill_tree, sample_until, until

from gputop.model.roles import DATALOADER_WORKER, RANK, WORKER
from gputop.sources.agent_link import AgentLink
from gputop.sources.host import HostSource
from gputop.sources.stacks import PySpy, StackSource, explain, find_py_spy

JOB = """
import os, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        time.sleep(0.02)
        return torch.ones(8)


def run(rank, world, init, context):
    if os.environ.get("WITH_AGENT"):
        import gputop.agent as gt
        gt.init()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    workers = int(os.environ.get("WORKERS", "1"))
    loader = DataLoader(Slow(), batch_size=2, num_workers=workers,
                        multiprocessing_context=context if workers else None)
    for i, x in enumerate(loader):
        ddp(x).sum().backward()
        opt.step()
        opt.zero_grad()
        if i == 1:
            print(f"ready {rank}", flush=True)


if __name__ == "__main__":
    if "RANK" in os.environ:  # under torchrun
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://", sys.argv[1])
    else:
        mp.spawn(run, args=(2, f"tcp://127.0.0.1:{sys.argv[2]}", sys.argv[1]), nprocs=2)
"""

LAUNCHER = """
import os, subprocess, sys
code = "import time\\nwhile True: time.sleep(1)"
kids = [
    subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **extra})
    for extra in (
        {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
         "OMPI_COMM_WORLD_SIZE": "2"},
        {"SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_NTASKS": "2"},
    )
]
helper = subprocess.Popen([sys.executable, "-c", code])  # no variables: not a rank
print("ready", flush=True)
kids[0].wait()
"""


def start(args: list[str], ready: int, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a job and wait for ``ready`` lines (each rank's after its second step)."""
    errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 (read when the job fails)
    p = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
    )
    lines: list[str] = []

    def read() -> None:
        for line in p.stdout:  # ranks share the pipe: their lines may interleave
            lines.extend(["ready"] * line.count("ready"))
            if len(lines) >= ready:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(180)  # torch imported by every process on two shared cores
    if len(lines) < ready:
        kill_tree(p)
        errors.seek(0)
        pytest.fail(f"the job did not start: {lines} {errors.read()[-3000:]}")
    return p


def roles_of(pid: int) -> dict[int, tuple[str, int | None, int]]:
    """pid -> (role, rank, ppid) as the host source sees the tree."""
    host = HostSource.open(pid, thread_tier_s=0.1)
    sample = host.sample()
    return {p.pid: (p.role, p.rank, p.ppid) for p in sample.processes}


class CountingSpy(PySpy):
    """The real py-spy, remembering which processes each tick dumped; the first dump of each
    process in ``fail_once`` fails as py-spy's does when it loses a race with a busy process
    (seen about once in 80 dumps on a loaded machine)."""

    def __init__(self, fail_once: set[int] = frozenset()) -> None:
        super().__init__()
        self.dumped: list[int] = []
        self.fail_once = set(fail_once)

    def dump(self, pid: int, blocking: bool = False, native: bool = False):
        self.dumped.append(pid)
        if pid in self.fail_once:
            self.fail_once.discard(pid)
            return None, explain("Error: Failed to get stack traces", 1, pid)
        return super().dump(pid, blocking, native)


def check_stacks(pid: int, ranks: set[int], workers: set[int], ticks: int = 3) -> None:
    """Every tick dumps both ranks, and one worker at most (workers take turns); a rank whose
    dump failed is backed off, then read."""
    spy = CountingSpy(fail_once={min(ranks)})
    source = StackSource(pid, spy=spy)
    read: set[int] = set()
    for _ in range(ticks):
        spy.dumped.clear()
        sample = source.sample()
        # every rank every tick, unless py-spy just failed on it (it backs off, and says so)
        missed = ranks - set(spy.dumped)
        assert all(r in source._failures for r in missed), (spy.dumped, ranks, source.tree())
        assert len(workers & set(spy.dumped)) <= 1, spy.dumped
        shown = {p.pid: (p.role, p.rank) for p in sample.processes}
        assert {shown[r][0] for r in ranks} == {RANK}, shown
        assert {shown[r][1] for r in ranks} == {0, 1}, shown
        read |= {p.pid for p in sample.processes if any(t.frames for t in p.threads)}
    assert {r for r, (role, _) in shown.items() if role == WORKER} <= workers

    def all_read(sample) -> bool:  # the failed rank: read once its back-off ends
        read.update(p.pid for p in sample.processes if any(t.frames for t in p.threads))
        return ranks <= read

    sample = sample_until(source, all_read)
    assert ranks <= read, {p.pid: p.error for p in sample.processes}


def check_tree(
    tree: dict[int, tuple[str, int | None, int]], ranks_under: int
) -> tuple[set[int], set[int]]:
    ranks = {pid for pid, (role, _, _) in tree.items() if role == RANK}
    workers = {pid for pid, (role, _, _) in tree.items() if role == WORKER}
    assert len(ranks) == 2 and {tree[r][1] for r in ranks} == {0, 1}, tree
    assert all(tree[r][2] == ranks_under for r in ranks), tree
    assert len(workers) == 2 and {tree[w][2] for w in workers} == ranks, tree
    for w in workers:
        assert Path(f"/proc/{w}/comm").read_text().startswith(DATALOADER_WORKER)
    return ranks, workers


torch_only = pytest.mark.skipif(
    not any(Path(p, "torch").is_dir() for p in sys.path if p), reason="needs torch"
)
spy_only = pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed")


@torch_only
@spy_only
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_spawned_ranks_are_ranks_and_their_loaders_workers(tmp_path, context):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    p = start([sys.executable, str(script), context, str(free_port())], ready=2)
    try:
        ranks, workers = check_tree(roles_of(p.pid), ranks_under=p.pid)
        check_stacks(p.pid, ranks, workers)
    finally:
        kill_tree(p)


@torch_only
@spy_only
def test_torchrun_ranks_carry_their_rank(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    p = start(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(script), "fork"],
        ready=2,
    )  # fmt: skip
    try:
        tree = roles_of(p.pid)
        ranks, workers = check_tree(tree, ranks_under=p.pid)
        for r in ranks:
            env = Path(f"/proc/{r}/environ").read_bytes().split(b"\0")
            assert f"RANK={tree[r][1]}".encode() in env
        check_stacks(p.pid, ranks, workers)
    finally:
        kill_tree(p)


@torch_only
@spy_only
def test_spawned_ranks_without_workers_are_ranks_by_their_stacks(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    p = start([sys.executable, str(script), "fork", str(free_port())], ready=2,
              env={"WORKERS": "0"})  # fmt: skip
    try:
        stacks = StackSource(p.pid)
        host = HostSource.open(p.pid, thread_tier_s=0.1)
        tree = {q.pid: q.role for q in host.sample().processes}
        assert RANK not in tree.values(), tree  # leaves: /proc alone cannot tell
        stacks.sample()  # the first dumps: _wrap in both
        sample = sample_until(stacks, lambda s: sum(q.role == RANK for q in s.processes) == 2)
        got = {q.pid: (q.role, q.rank) for q in sample.processes}
        assert sorted(v for v in got.values() if v[0] == RANK) == [(RANK, 0), (RANK, 1)], got
        host.hints = stacks.hints
        time.sleep(0.15)  # pacing: past a thread tier (0.1 s): the next reading names roles anew
        got = {q.pid: (q.role, q.rank) for q in host.sample().processes}
        assert sorted(v for v in got.values() if v[0] == RANK) == [(RANK, 0), (RANK, 1)], got
    finally:
        kill_tree(p)


@torch_only
def test_the_agent_link_finds_an_agent_in_every_spawned_rank(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    agents = tmp_path / "agents"
    p = start(
        [sys.executable, str(script), "fork", str(free_port())],
        ready=2,
        env={"WITH_AGENT": "1", "GPUTOP_DIR": str(agents),
             "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    try:
        link = AgentLink(p.pid, directories=lambda: [agents])
        ranks = {pid for pid, (role, _, _) in roles_of(p.pid).items() if role == RANK}
        until(lambda: {a.pid for a in link.sample().agents} == ranks, timeout=30,
              what=f"an agent in each rank {sorted(ranks)}", every=0.2)  # fmt: skip
    finally:
        link.close()
        kill_tree(p)


def test_mpi_and_slurm_ranks_by_their_variables():
    p = start([sys.executable, "-c", LAUNCHER], ready=1)
    try:
        tree = roles_of(p.pid)
    finally:
        kill_tree(p)
    got = sorted((role, rank) for pid, (role, rank, _) in tree.items() if pid != p.pid)
    assert got == [("child", None), (RANK, 0), (RANK, 1)], tree
