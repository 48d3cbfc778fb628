"""The hang rule's edges on synthetic windows: a hang is no progress for longer than the job's
own cadence with every process parked and quiet; a slow step, a long checkpoint, an eval pass,
a rank or worker that still works are not hangs. With and without the agent."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from builders import agent, host_at, step
from builders import proc as a_proc

from gputop.diagnose.rules import hung, stalling
from gputop.diagnose.signals.host import host_signals
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.signals.stacks import stack_signals
from gputop.diagnose.signals.steps import step_signals
from gputop.model import Window
from gputop.model.host import ProcSample
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.model.steps import AgentsSample
from gputop.sources.stack_phases import classify

ALL_REDUCE = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 2800),
              Frame("sync_grads", "train.py", 55))  # fmt: skip
QUEUE_GET = (Frame("Condition.wait", "threading.py", 355), Frame("Queue.get", "queue.py", 180),
             Frame("next_batch", "train.py", 41))  # fmt: skip
USER_LOCK = (Frame("record_loss", "train.py", 33), Frame("<module>", "train.py", 60))
DATA_WAIT = (Frame("_MultiProcessingDataLoaderIter._get_data", "torch/utils/data/dataloader.py",
                   1300), Frame("<module>", "train.py", 70))  # fmt: skip
SAVE = (Frame("_save", "torch/serialization.py", 900), Frame("save_ckpt", "train.py", 80))
FORWARD = (Frame("Module._call_impl", "torch/nn/modules/module.py", 1750),
           Frame("<module>", "train.py", 50))  # fmt: skip
BACKWARD = (Frame("_engine_run_backward", "torch/autograd/graph.py", 820),
            Frame("<module>", "train.py", 52))  # fmt: skip
WORKER_WAIT = (Frame("Event.wait", "threading.py", 600), Frame("__getitem__", "ds.py", 20))

Frames = tuple[Frame, ...]
Script = Callable[[float], Frames]
"""What a main thread shows at time t."""


def thread(frames: Frames, active: bool = False) -> ThreadStack:
    return ThreadStack(1, "MainThread", active, frames, *classify(frames, active))


def stacks_window(
    procs: Sequence[tuple[int, str, int | None, Script]], seconds: float, active: bool = False
) -> StacksSample | Window:
    """One dump a second of each (pid, role, rank, script) for ``seconds``."""
    samples = []
    for i in range(int(seconds) + 1):
        t = float(i)
        ps = tuple(ProcessStacks(pid, role, (thread(f(t), active),), rank=rank)
                   for pid, role, rank, f in procs)  # fmt: skip
        samples.append(StacksSample(procs[0][0], t, t, ps))
    return Window(tuple(samples), 0.0, seconds)


def host_window(
    cpu: dict[int, tuple[str, float]],
    seconds: float,
    writes: float = 0.0,
    main_thread: float | None = None,
) -> Window:
    """A host reading every second: pid -> (role, CPU cores); ``main_thread``: each process's
    main thread's own CPU (cores)."""

    def proc(pid: int, role: str, cores: float) -> ProcSample:
        return a_proc(pid, role, name="python", cmdline="", state="S", cpu_cores=cores,
                      threads_running=0, write_bytes_rate=writes,
                      main_thread_cores=main_thread)  # fmt: skip

    procs = tuple(proc(p, r, c) for p, (r, c) in cpu.items())
    samples = tuple(host_at(t, procs, pid=100, effective_cpus_source="affinity")
                    for t in range(int(seconds) + 1))  # fmt: skip
    return Window(samples, 0.0, seconds)


def agents(since_step_s: float, step_ms: float = 40.0, n: int = 30, pid: int = 100,
           open_phase: str = "forward") -> AgentsSample:  # fmt: skip
    steps = tuple(
        step(i, i * int(step_ms * 1e6), {"forward": step_ms / 2, "backward": step_ms / 2})
        for i in range(n)
    )
    a = agent(pid, steps, since_step_s=since_step_s, open_phase=open_phase)
    return AgentsSample(target=pid, t=1.0, wall=0.0, agents=(a,))


def inputs(stacks=None, host=None, agents_=None) -> RuleInputs:
    return RuleInputs(
        gpu=None,
        host=host_signals(host),
        steps=step_signals(agents_),
        stacks=stack_signals(stacks) if stacks is not None else None,
    )


def still(frames: Frames) -> Script:
    return lambda t: frames


def stuck_after(t0: float, before: Script, then: Frames) -> Script:
    return lambda t: before(t) if t < t0 else then


def moving(t: float) -> Frames:
    """A training loop: forward and backward alternate from dump to dump."""
    return FORWARD if int(t) % 2 else BACKWARD


QUIET = {100: ("main", 0.0)}


# -- hangs -----------------------------------------------------------------------------------


def test_a_user_code_lock_without_the_agent_is_hung_after_ten_seconds():
    stuck = stacks_window([(100, "main", None, stuck_after(20, moving, USER_LOCK))], 31)
    f = hung(inputs(stuck, host_window(QUIET, 31)))
    assert f.fired
    assert f.summary == "no progress: pid 100 blocked at train.py:33 in record_loss"
    assert "same stack for 11 s (12 reads by py-spy), CPU 0.00 cores" in f.evidence[0].text
    early = stacks_window([(100, "main", None, stuck_after(24, moving, USER_LOCK))], 31)
    assert not hung(inputs(early, host_window(QUIET, 31))).fired


def test_the_jobs_own_pauses_set_the_limit_without_the_agent():
    # a job that waits 5 s at a time on something (a remote read): 10 s still is not a hang
    def pauses(t: float) -> Frames:
        return QUEUE_GET if int(t) % 7 < 6 else FORWARD

    slow = stacks_window([(100, "main", None, stuck_after(35, pauses, QUEUE_GET))], 47)
    assert not hung(inputs(slow, host_window(QUIET, 47))).fired  # 12 s < 3 x 5 s
    longer = stacks_window([(100, "main", None, stuck_after(35, pauses, QUEUE_GET))], 52)
    f = hung(inputs(longer, host_window(QUIET, 52)))
    assert f.fired and "Queue.get at train.py:41" in f.summary


def test_a_rank_not_in_the_collective_is_named_with_its_frame():
    ranks = [(100, "rank", 0, stuck_after(5, moving, ALL_REDUCE)),
             (101, "rank", 1, stuck_after(5, moving, QUEUE_GET))]  # fmt: skip
    f = hung(inputs(stacks_window(ranks, 20), host_window({100: ("rank", 0), 101: ("rank", 0)},
                                                          20)))  # fmt: skip
    assert f.fired
    assert f.summary == (
        "no progress: rank 1 (pid 101) is not in the all_reduce that rank 0 (pid 100) waits in: "
        "it is blocked in Queue.get at train.py:41"
    )


def test_ddp_ranks_parked_in_backward_wait_in_the_gradient_all_reduce():
    ranks = [(100, "rank", 0, stuck_after(5, moving, BACKWARD)),
             (101, "rank", 1, stuck_after(5, moving, USER_LOCK))]  # fmt: skip
    f = hung(inputs(stacks_window(ranks, 20), host_window({100: ("rank", 0), 101: ("rank", 0)},
                                                          20)))  # fmt: skip
    assert f.fired
    assert "is not in the gradient all-reduce that rank 0 (pid 100) waits in" in f.summary


def test_a_parked_main_with_idle_workers_is_hung_and_names_the_workers_frame():
    procs = [(100, "main", None, stuck_after(5, moving, DATA_WAIT)),
             (200, "worker", None, still(WORKER_WAIT)),
             (201, "worker", None, still(WORKER_WAIT))]  # fmt: skip
    cpu = {100: ("main", 0.01), 200: ("worker", 0.0), 201: ("worker", 0.0)}
    f = hung(inputs(stacks_window(procs, 20), host_window(cpu, 20)))
    assert f.fired and "waits in _MultiProcessingDataLoaderIter._get_data" in f.summary
    assert any("2 DataLoader workers idle too, last seen in Event.wait at ds.py:20" in e.text
               for e in f.evidence)  # fmt: skip


def test_the_agents_missing_steps_are_confirmed_by_the_stacks():
    stuck = stacks_window([(100, "main", None, stuck_after(8, moving, QUEUE_GET))], 18)
    f = hung(inputs(stuck, host_window(QUIET, 18), agents(since_step_s=10.5)))
    assert f.fired and {e.source for e in f.evidence} == {"agent", "stacks", "host"}
    assert f.evidence[0].text.startswith("no step for 10 s in forward (limit max(10 s, 3x")


def test_with_the_agent_alone_quiet_cpu_confirms_and_no_cpu_readings_wait_60_s():
    assert hung(inputs(host=host_window(QUIET, 12), agents_=agents(since_step_s=12))).fired
    busy = host_window({100: ("main", 0.9)}, 12)
    assert not hung(inputs(host=busy, agents_=agents(since_step_s=12))).fired
    assert not hung(inputs(agents_=agents(since_step_s=30))).fired
    assert hung(inputs(agents_=agents(since_step_s=61))).fired


# -- not hangs -------------------------------------------------------------------------------


def test_a_slow_step_that_still_moves_is_not_hung():
    # 4-s steps: the limit is 12 s; and a stack that moves is progress whatever the agent says
    slow = stacks_window([(100, "main", None, moving)], 30, active=True)
    busy = host_window({100: ("main", 1.0)}, 30)
    assert not hung(inputs(slow, busy, agents(since_step_s=11, step_ms=4000))).fired
    assert not hung(inputs(slow, busy, agents(since_step_s=25, step_ms=4000))).fired
    assert not hung(inputs(slow, busy)).fired


def test_a_long_checkpoint_is_not_hung_on_cpu_or_on_bytes_written():
    saving = stacks_window([(100, "main", None, stuck_after(5, moving, SAVE))], 35)
    assert not hung(inputs(saving, host_window({100: ("main", 0.9)}, 35),
                           agents(since_step_s=30))).fired  # fmt: skip
    slow_disk = host_window({100: ("main", 0.02)}, 35, writes=40e6)
    assert not hung(inputs(saving, slow_disk, agents(since_step_s=30))).fired


def test_an_eval_pass_is_not_hung():
    # no step for 25 s (eval between steps) while the stack moves through forward calls
    evaluating = stacks_window([(100, "main", None, moving)], 30, active=True)
    f = hung(inputs(evaluating, host_window({100: ("main", 1.0)}, 30),
                    agents(since_step_s=25, open_phase="eval")))  # fmt: skip
    assert not f.fired


def test_a_parked_rank_while_the_other_rank_works_is_not_hung():
    ranks = [(100, "rank", 0, stuck_after(2, moving, ALL_REDUCE)),
             (101, "rank", 1, stuck_after(2, moving, SAVE))]  # fmt: skip
    cpu = {100: ("rank", 0.0), 101: ("rank", 0.95)}
    assert not hung(inputs(stacks_window(ranks, 25), host_window(cpu, 25))).fired


def test_a_parked_main_with_busy_workers_is_not_hung():
    procs = [(100, "main", None, stuck_after(2, moving, DATA_WAIT)),
             (200, "worker", None, still(WORKER_WAIT))]  # fmt: skip
    cpu = {100: ("main", 0.0), 200: ("worker", 0.97)}
    assert not hung(inputs(stacks_window(procs, 25), host_window(cpu, 25))).fired


def test_before_its_first_steps_a_rank_gets_thirty_seconds():
    # a rank's agent with no step yet: ranks wait for each other at start (rendezvous)
    first = agents(since_step_s=0.0, n=0)
    first = replace(first, agents=(replace(first.agents[0], since_step_s=None, rank=0),))
    waiting = stacks_window([(100, "main", None, still(DATA_WAIT))], 25)
    assert not hung(inputs(waiting, host_window(QUIET, 25), first)).fired
    longer = stacks_window([(100, "main", None, still(DATA_WAIT))], 31)
    assert hung(inputs(longer, host_window(QUIET, 31), first)).fired


def test_an_exited_job_is_not_hung():
    gone = host_window(QUIET, 20)
    gone = Window(tuple(replace(s, state="exited") for s in gone.samples), 0.0, 20.0)
    stuck = stacks_window([(100, "main", None, still(USER_LOCK))], 20)
    assert not hung(inputs(stuck, gone, agents(since_step_s=100))).fired


def test_a_thread_spinning_in_a_cuda_sync_past_the_cadence_is_hung():
    # CUDA's spin-wait burns a core while a hung collective kernel never ends
    sync = (Frame("synchronize", "torch/cuda/__init__.py", 990), Frame("train_step", "t.py", 9))
    stuck = stacks_window([(100, "main", None, stuck_after(3, moving, sync))], 16, active=True)
    f = hung(inputs(stuck, host_window({100: ("main", 1.0)}, 16), agents(since_step_s=13)))
    assert f.fired and "synchronize at t.py:9" in f.summary
    slow = agents(since_step_s=13, step_ms=5000)  # 5-s steps: 13 s is under 3 x p99
    assert not hung(inputs(stuck, host_window({100: ("main", 1.0)}, 16), slow)).fired


def test_an_agent_loaded_into_a_job_already_stuck_on_a_lock_keeps_the_floor():
    late = agents(since_step_s=0.0, n=0)
    late = replace(late, agents=(replace(late.agents[0], since_step_s=40.0, rank=0),))
    stuck = stacks_window([(100, "main", None, still(USER_LOCK))], 12)
    assert hung(inputs(stuck, host_window(QUIET, 12), late)).fired


# -- a slow feed is not a hang ----------------------------------------------------------------


def test_a_main_thread_that_wakes_for_each_batch_of_a_slow_loader_is_not_hung():
    """Remote reads: the main thread is in the DataLoader's wait at every dump and the whole tree
    uses a few hundredths of a core, but its main thread wakes for each batch (4 ms a second)."""
    window = stacks_window([(100, "main", None, still(DATA_WAIT))], 30)
    slow_feed = host_window({100: ("main", 0.04)}, 30, main_thread=0.004)
    assert not hung(inputs(window, slow_feed)).fired
    blocked = host_window({100: ("main", 0.04)}, 30, main_thread=0.0)
    assert hung(inputs(window, blocked)).fired


def test_a_collective_that_polls_is_hung_though_its_main_thread_uses_cpu():
    """NCCL's blocking wait polls: the main thread's CPU says nothing there; the cadence does."""
    window = stacks_window([(100, "rank", 0, stuck_after(5, moving, ALL_REDUCE))], 30)
    polling = host_window({100: ("rank", 0.02)}, 30, main_thread=0.02)
    f = hung(inputs(window, polling, agents(since_step_s=25.0)))
    assert f.fired


def test_a_stall_is_said_before_it_is_called_a_hang():
    """Between the job stopping and the hang limit the verdict says who waits where; a slow feed
    and a thread still moving get no such note."""
    stuck = stacks_window([(100, "main", None, stuck_after(24, moving, USER_LOCK))], 31)
    sig = inputs(stuck, host_window(QUIET, 31))
    assert not hung(sig).fired
    assert stalling(sig) == (
        "no progress for 7 s: pid 100 blocked at train.py:33 in record_loss (hung after 10 s)"
    )
    feed = stacks_window([(100, "main", None, still(DATA_WAIT))], 8)
    assert stalling(inputs(feed, host_window(QUIET, 8, main_thread=0.004))) is None
    assert stalling(inputs(stacks_window([(100, "main", None, moving)], 31),
                           host_window(QUIET, 31))) is None  # fmt: skip


def test_a_job_whose_agents_exited_is_not_hung_long_after():
    """65 s after a clean exit, with the host readings gone from the window, the agent's clock
    alone said hung; an agent that said goodbye ended with its job."""
    gone = agents(since_step_s=65.0)
    alive = hung(inputs(agents_=gone))
    assert alive.fired  # no host, no stacks: the agent's clock alone, past 60 s
    exited = replace(gone, agents=tuple(replace(a, state="exited") for a in gone.agents))
    assert not hung(inputs(agents_=exited)).fired
