"""The role rule (model/roles.roles): which process of a tree is a rank, a worker or a child."""

from __future__ import annotations

from gputop.model.roles import (
    CHILD,
    MAIN,
    RANK,
    WORKER,
    ProcFacts,
    RankId,
    RoleHint,
    merge_hints,
    rank_above,
    rank_from_env,
    roles,
)

PY = "/usr/bin/python3 train.py"
SPAWNED = "/usr/bin/python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7) --multiprocessing-fork"  # noqa: E501
FORKSERVER = "/usr/bin/python3 -c from multiprocessing.forkserver import main; main(8, 9)"


def p(pid, ppid, cmdline=PY, comm="python3", env=None, start=None):
    return ProcFacts(pid, start if start is not None else pid, ppid, comm, cmdline, env or {})


def test_launcher_variables_give_the_rank_most_specific_launcher_first():
    assert rank_from_env({}) is None
    assert rank_from_env({"WORLD_SIZE": "2"}) is None
    torchrun = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "x"}
    assert rank_from_env(torchrun) == RankId(3, 1, 4, "torchrun")
    under_srun = {**torchrun, "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "1"}
    assert rank_from_env(under_srun) == RankId(3, 1, 4, "torchrun")
    slurm = {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NTASKS": "8"}
    assert rank_from_env(slurm) == RankId(5, 1, 8, "slurm")
    mpi = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "OMPI_COMM_WORLD_SIZE": "4"}  # fmt: skip
    assert rank_from_env(mpi) == RankId(2, 0, 4, "mpi")
    # Lightning's children: LOCAL_RANK and NODE_RANK, no RANK
    assert rank_from_env({"LOCAL_RANK": "1", "NODE_RANK": "0", "WORLD_SIZE": "2"}) == RankId(
        1, 1, 2, "lightning"
    )
    assert rank_from_env({"LOCAL_RANK": "1", "NODE_RANK": "1"}).rank is None
    assert rank_from_env({"RANK": "x", "SLURM_PROCID": "1"}) == RankId(1, None, None, "slurm")


def test_torchrun_ranks_by_their_variables_workers_by_name_or_inheritance():
    launcher = p(10, 1, "/usr/bin/python3 -m torch.distributed.run --nproc-per-node 2 t.py")
    r0 = p(11, 10, "/usr/bin/python3 -u t.py", env={"RANK": "0", "WORLD_SIZE": "2"})
    r1 = p(12, 10, "/usr/bin/python3 -u t.py", env={"RANK": "1", "WORLD_SIZE": "2"})
    named = p(13, 11, r0.cmdline, comm="pt_data_worker", env=r0.env)
    # a worker of rank 1 before torch names it: it inherited its rank's variables
    unnamed = p(14, 12, SPAWNED, env=r1.env)
    got = roles([launcher, r0, r1, named, unnamed], 10)
    assert got[10] == (MAIN, None)
    assert got[11] == (RANK, RankId(0, None, 2, "torchrun"))
    assert got[12] == (RANK, RankId(1, None, 2, "torchrun"))
    assert got[13] == (WORKER, None)
    assert got[14] == (CHILD, None)


def test_spawned_children_with_workers_are_ranks_numbered_in_start_order():
    main = p(20, 1)
    r1 = p(22, 20, SPAWNED, start=100)  # started first although its pid is higher
    r0 = p(21, 20, SPAWNED, start=101)
    w0 = p(30, 22, PY, comm="pt_data_worker")
    w1 = p(31, 21, SPAWNED, comm="pt_data_worker")
    tracker = p(
        25, 20, "/usr/bin/python3 -c from multiprocessing.resource_tracker import main;main(4)"
    )
    got = roles([main, r0, r1, w0, w1, tracker], 20)
    assert got[22] == (RANK, RankId(0, 0, None, "spawn order"))
    assert got[21] == (RANK, RankId(1, 1, None, "spawn order"))
    assert got[30] == got[31] == (WORKER, None)
    assert got[25] == (CHILD, None)


def test_a_spawned_child_is_never_a_worker_for_being_spawned():
    main = p(20, 1)
    kid = p(21, 20, SPAWNED)
    forked = p(22, 20, PY)  # a forked copy of the main, unnamed
    got = roles([main, kid, forked], 20)
    assert got[21] == got[22] == (CHILD, None)
    # its stack says what it is: torch's _worker_loop, or torch.multiprocessing.spawn's _wrap
    got = roles([main, kid, forked], 20, {21: RoleHint(WORKER), 22: RoleHint(RANK)})
    assert got[21] == (WORKER, None)
    assert got[22] == (RANK, RankId(0, 0, None, "spawn order"))


def test_forkserver_children_are_ranks_the_forkserver_is_not():
    main = p(40, 1)
    server = p(41, 40, FORKSERVER)
    r0 = p(42, 41, FORKSERVER)
    w = p(43, 42, FORKSERVER, comm="pt_data_worker")
    got = roles([main, server, r0, w], 40)
    assert got[41] == (CHILD, None)
    assert got[42][0] == RANK and got[43] == (WORKER, None)


def test_the_agent_wins_and_a_worker_stack_beats_a_rank_claim():
    main = p(20, 1)
    kid = p(21, 20, SPAWNED)
    agent = {21: RoleHint(RANK, RankId(5, 1, 8, "agent"))}
    assert roles([main, kid], 20, agent)[21] == (RANK, RankId(5, 1, 8, "agent"))
    env = p(21, 20, SPAWNED, env={"RANK": "2"})
    assert roles([main, env], 20, agent)[21] == (RANK, RankId(5, 1, 8, "agent"))
    # an agent in a spawned worker reports the variables it inherited: its stack wins
    merged = merge_hints({21: RoleHint(WORKER)}, agent)
    assert roles([main, kid], 20, merged)[21] == (WORKER, None)
    assert merge_hints({21: RoleHint(RANK)}, agent)[21] == agent[21]
    assert merge_hints(agent, {21: RoleHint(RANK)})[21] == agent[21]


def test_slurm_and_mpi_ranks_and_the_target_as_one_rank():
    launcher = p(50, 1, "mpirun -n 2 python t.py")
    a = p(51, 50, "python t.py", env={"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"})
    b = p(52, 50, "python t.py", env={"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"})
    got = roles([launcher, a, b], 50)
    assert [got[x][0] for x in (50, 51, 52)] == [MAIN, RANK, RANK]
    assert got[52][1] == RankId(1, None, 2, "mpi")
    # attached to one srun task: it is main, with its rank; a child inheriting it is a child
    task = p(60, 1, env={"SLURM_PROCID": "3", "SLURM_NTASKS": "4"})
    helper = p(61, 60, "/bin/sh -c nvidia-smi", env=task.env)
    got = roles([task, helper], 60)
    assert got[60] == (MAIN, RankId(3, None, 4, "slurm"))
    assert got[61] == (CHILD, None)
    # an unreadable environment is no evidence either way
    hidden = ProcFacts(62, 62, 60, "python", PY, None)
    assert roles([task, hidden], 60)[62] == (CHILD, None)


def test_a_stack_says_worker_or_rank_up_to_where_the_child_began():
    from gputop.model.stacks import Frame, ThreadStack
    from gputop.sources.stacks import stack_role

    def thread(*frames):
        fr = tuple(Frame(n, f, 1) for n, f in frames)
        return ThreadStack(1, "MainThread", True, fr, "other", None)

    boot = ("_bootstrap", "multiprocessing/process.py")
    wrap = ("_wrap", "torch/multiprocessing/spawn.py")
    loop = ("_worker_loop", "torch/utils/data/_utils/worker.py")
    train = ("train", "t.py")
    assert stack_role([thread(train, wrap, ("run", "multiprocessing/process.py"), boot)]) == RANK
    # a worker forked by a spawned rank carries the rank's frames below its own _bootstrap
    assert stack_role([thread(("get", "queue.py"), loop, boot, train, wrap)]) == WORKER
    assert (
        stack_role([thread(("_run_after_forkers", "multiprocessing/util.py"), boot, wrap)]) is None
    )
    assert stack_role([thread(("<module>", "t.py"))]) is None


def test_a_helper_with_its_ranks_variables_is_a_child_whoever_says_it_is_that_rank():
    """A helper rank 0 started (a lock holder, a preprocessor) inherits rank 0's variables;
    under `gputop run` it has an agent of its own, which reports them as its rank. Adopted
    higher up once its parent is gone, it keeps them too. One rank number is one process: the
    first started; the others are children."""
    launcher = p(10, 1, "/usr/bin/python3 -m torch.distributed.run --nproc-per-node 2 t.py")
    env0 = {"RANK": "0", "WORLD_SIZE": "2"}
    r0 = p(11, 10, "/usr/bin/python3 -u t.py", env=env0, start=100)
    r1 = p(12, 10, "/usr/bin/python3 -u t.py", env={"RANK": "1", "WORLD_SIZE": "2"}, start=101)
    by_agent = {13: RoleHint(RANK, RankId(0, None, 2, "agent"))}
    for parent in (11, 10):  # its rank's child; adopted by the launcher
        helper = p(13, parent, "/usr/bin/python3 helper.py", env=env0, start=150)
        for hints in (None, by_agent):
            got = roles([launcher, r0, r1, helper], 10, hints)
            assert got[11] == (RANK, RankId(0, None, 2, "torchrun"))
            assert got[12][0] == RANK and got[13] == (CHILD, None), (parent, hints, got)


def test_a_helper_a_rank_started_is_that_ranks_child():
    parent = {300: 201, 201: 101, 101: 100, 100: 1, 400: 100}  # 300 below 201 below rank 1
    ranks = {101: 1, 102: 0}
    assert rank_above(300, parent, ranks) == 1 and rank_above(201, parent, ranks) == 1
    assert rank_above(400, parent, ranks) is None  # the launcher's own helper: no rank above
    assert rank_above(5, {5: 5}, ranks) is None  # a loop in crafted input ends
