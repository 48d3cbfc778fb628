"""The verdict's rules on synthetic windows: each bound class, missing inputs, hysteresis."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType as M

import pytest
from builders import host_at
from builders import proc as a_proc

from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.rules import data_input
from gputop.model import Window
from gputop.model.host import CgroupSample
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.model.steps import AgentsSample, AgentState, StepRecord
from gputop.sim import SimBoard, installed
from gputop.sources.nvml import NvmlSource
from gputop.sources.stack_phases import classify

_GPU_CACHE: dict = {}


def gpu(scenario: str = "compute", board: str = "h100x2"):
    """Windows of real NVML readings over the simulated board (cached per scenario)."""
    if (scenario, board) not in _GPU_CACHE:
        clock = [0.0]
        sim = SimBoard(board, scenario=scenario, clock=lambda: clock[0], warmup_s=600)
        with installed(sim):
            src = NvmlSource.open(clock=lambda: clock[0])
            history = []
            for _ in range(20):
                clock[0] += 1.5
                history.append(src.sample())
            src.close()
        windows = [
            Window(tuple(h[i] for h in history), 0.0, clock[0]) for i in range(len(history[0]))
        ]
        _GPU_CACHE[(scenario, board)] = (windows, src.devices)
    return _GPU_CACHE[(scenario, board)]


def agents(
    phases_ms: dict[str, float],
    ranks: int = 1,
    slow: dict[int, float] | None = None,
    spikes: dict[int, dict[str, float]] | None = None,
    since_step_s: float = 0.05,
    open_phase: str | None = "forward",
    fingerprint: dict | None = None,
) -> AgentsSample:
    """Agent states with 30 steps of the given phases. ``slow``: rank -> extra forward ms,
    which every other rank then waits for in grad_sync."""
    slow = slow or {}
    loader = M({"num_workers": 0, "pin_memory": False, "persistent_workers": False})
    out = []
    for r in range(ranks):
        steps = []
        for i in range(30):
            ph = dict(phases_ms)
            if r in slow:
                ph["forward"] = ph.get("forward", 0) + slow[r]
            elif slow:
                ph["grad_sync"] = ph.get("grad_sync", 0) + max(slow.values())
            for k, v in (spikes or {}).get(i, {}).items():
                ph[k] = ph.get(k, 0) + v
            total = sum(ph.values()) + 0.5
            ns = M({k: int(v * 1e6) for k, v in ph.items()})
            steps.append(StepRecord(i, int(i * 1e9), int(total * 1e6), ns, samples=32))
        out.append(
            AgentState(
                pid=100 + r,
                state="connected",
                rank=r if ranks > 1 else None,
                local_rank=None,
                world_size=ranks if ranks > 1 else None,
                hostname="h",
                argv=(),
                fingerprint=M(fingerprint or {"dataloader": loader}),
                steps=tuple(steps),
                open_phase=open_phase,
                open_age_s=0.01,
                since_step_s=since_step_s,
                heartbeat_age_s=0.1,
                agent_errors=0,
                dropped=0,
            )
        )
    return AgentsSample(target=100, t=1.0, wall=0.0, agents=tuple(out))


def host(
    cpus: float = 8.0,
    running: int = 2,
    runq: float = 0.1,
    workers: tuple[float, ...] | list[float] = (),
    throttled: float | None = None,
    ws_gib: float = 4,
    limit_gib: float | None = None,
    oom: int = 0,
    disk_wait: int = 0,
    io_psi: float = 0.0,
    read_mbps: float = 0.0,
    mem_psi: float = 0.0,
    limit_hits: int = 0,
    worker_kernel: float = 0.0,
) -> Window:
    """``worker_kernel``: the share of each worker's CPU spent in the kernel (system time)."""

    def proc(pid: int, role: str, cpu: float, threads_running: int, wait: float, dw: int = 0,
             read: float | None = None):  # fmt: skip
        name = "python" if role == "main" else "pt_data_worker"
        kernel = cpu * worker_kernel if role == "worker" else 0.0
        return a_proc(pid, role, name=name, cmdline="", cpu_cores=cpu,
                      threads_running=threads_running, threads_disk_wait=dw, runq_wait=wait,
                      read_bytes_rate=read, kernel_cores=kernel)  # fmt: skip

    main = proc(100, "main", 0.5, running, runq, disk_wait, read_mbps * 1e6)
    procs = (main, *(proc(200 + i, "worker", c, 1, 0.0) for i, c in enumerate(workers)))
    limit = int(limit_gib * 2**30) if limit_gib else None
    psi = M({"io": M({"some_avg10": io_psi}), "memory": M({"some_avg10": mem_psi})})
    events = M({"oom_kill": oom, "max": limit_hits})
    cg = CgroupSample("v2", cpus, "/x", None, throttled, None, limit, "/x", None,
                      int(ws_gib * 2**30), events, events, 0, "cgroup", psi)  # fmt: skip
    samples = tuple(host_at(t, procs, cpus, effective_cpus_source="cgroup quota",
                            affinity_cpus=64, cgroup=cg) for t in range(5))  # fmt: skip
    return Window(samples, 0.0, 5.0)


def stacks(
    phase_frames: list[tuple[str, str]], n: int = 10, same: bool = False, active: bool = False
) -> Window:
    samples = []
    for i in range(n):
        file, name = phase_frames[0 if same else i % len(phase_frames)]
        frames = (Frame(name, file, 1), Frame("main", "train.py", 10))
        phase, deciding = classify(frames, active)
        t = ThreadStack(100, "MainThread", active, frames, phase, deciding)
        samples.append(StacksSample(100, float(i), 0.0, (ProcessStacks(100, "main", (t,)),)))
    return Window(tuple(samples), 0.0, float(n))


def verdict(gpu_scenario="compute", **kw):
    windows, devices = gpu(gpu_scenario, kw.pop("board", "h100x2"))
    sig = reduce_windows(windows if gpu_scenario else [], devices if gpu_scenario else [], **kw)
    v, _ = evaluate(sig, now=10.0)
    return v


def bound(v) -> str | None:
    return v.principal.bound if v.principal else None


def test_healthy_compute_is_named_with_its_levers():
    v = verdict(
        "compute", agents=agents({"data_wait": 1, "forward": 40, "backward": 50, "optimizer": 5})
    )
    assert bound(v) == "gpu-compute"
    assert any("SM clock" in e.text for e in v.principal.evidence)
    assert v.principal.levers


def test_data_wait_from_the_agent_names_data_input_and_the_users_setting():
    v = verdict("starved", agents=agents({"data_wait": 60, "forward": 10, "backward": 12}),
                host=host(cpus=16))  # fmt: skip
    assert bound(v) == "data-input"
    assert v.principal.confidence >= 0.6  # agent and NVML agree (stacks missing costs a bit)
    assert v.principal.levers[0] == "DataLoader num_workers=0 on a 16-CPU quota: try 15"


def test_pegged_workers_make_it_cpu_transform():
    loader = {"dataloader": M({"num_workers": 3, "pin_memory": True, "persistent_workers": True})}
    v = verdict("starved", agents=agents({"data_wait": 60, "forward": 10}, fingerprint=loader),
                host=host(cpus=4, workers=[0.97, 0.95, 0.99]))  # fmt: skip
    assert bound(v) == "data-input/cpu-transform"
    assert (
        "make each batch cheaper to prepare, or move that work to the GPU" in v.principal.levers[0]
    )


def test_workers_busy_in_system_calls_read_many_files_rather_than_transform():
    """Many small files from the page cache: the workers are busy, but in open/read/close."""
    v = verdict("starved", agents=agents({"data_wait": 60, "forward": 10}),
                host=host(cpus=2, workers=[0.8, 0.75], worker_kernel=0.6))  # fmt: skip
    assert bound(v) == "data-input/io"
    assert v.principal.evidence[-1].text == (
        "2 DataLoader workers spend 60% of their CPU in the kernel (>= 40%), 78% of a core each:"
        " opening and reading files, not transforming them"
    )
    assert any("many small files" in lever for lever in v.principal.levers)
    transform = verdict("starved", agents=agents({"data_wait": 60, "forward": 10}),
                        host=host(cpus=2, workers=[0.8, 0.75], worker_kernel=0.05))  # fmt: skip
    assert bound(transform) == "data-input/cpu-transform"


def test_idle_workers_get_more_workers_even_past_the_cores():
    # workers that sleep on remote reads: the CPU-sized "cores-1" would be fewer than now
    loader = {"dataloader": M({"num_workers": 4, "pin_memory": True, "persistent_workers": True})}
    v = verdict("starved", agents=agents({"data_wait": 60, "forward": 10}, fingerprint=loader),
                host=host(cpus=2, workers=[0.02, 0.01, 0.02, 0.03]))  # fmt: skip
    assert bound(v) == "data-input"
    assert v.principal.levers[0].startswith("DataLoader num_workers=4: try 8;")


def test_no_worker_settings_that_need_workers_when_there_are_none():
    """persistent_workers and prefetch_factor exist only with workers (torch refuses
    prefetch_factor with num_workers=0): said as what comes with the first workers."""
    v = verdict("starved", agents=agents({"data_wait": 60, "forward": 10}), host=host(cpus=16))
    levers = v.principal.levers
    assert levers[0] == "DataLoader num_workers=0 on a 16-CPU quota: try 15"
    assert not any(lv.startswith(("persistent_workers", "prefetch_factor")) for lv in levers)
    assert "with workers: persistent_workers=True and prefetch_factor=2-4" in levers


def test_no_more_workers_on_cpus_the_job_already_wants_in_full():
    """A 2-CPU box whose workers wait on a run queue (1.7 waiting): 'try 4' would add
    processes to the same two CPUs."""
    loader = {"dataloader": M({"num_workers": 2, "pin_memory": True, "persistent_workers": True})}
    v = verdict("starved", agents=agents({"data_wait": 60, "forward": 10}, fingerprint=loader),
                host=host(cpus=2, runq=1.7, workers=[0.05, 0.05]))  # fmt: skip
    (data,) = [f for f in v.findings if f.fired and f.bound.startswith("data-input")]
    assert not any("try 4" in lv for lv in data.levers), data.levers
    assert data.levers[0].startswith("do not add DataLoader workers (now 2): the job already ")


def test_disk_wait_makes_it_io():
    v = verdict("starved", agents=agents({"data_wait": 60, "forward": 10}),
                host=host(workers=[0.1, 0.1], disk_wait=3, io_psi=30))  # fmt: skip
    assert bound(v) == "data-input/io"
    assert "3.0 threads in disk wait (D state) on average" in v.principal.evidence[-1].text


def test_io_pressure_while_the_job_reads_makes_it_io():
    v = verdict("starved", agents=agents({"data_wait": 60, "forward": 10}),
                host=host(workers=[0.1, 0.1], io_psi=30, read_mbps=400))  # fmt: skip
    assert bound(v) == "data-input/io"
    assert v.principal.evidence[-1].text == (
        "I/O pressure 30% (> 10%), reading 400 MB/s from storage"
    )
    assert v.principal.levers[0].startswith("stage the data on local NVMe")


def test_someone_elses_io_pressure_is_not_the_jobs_io():
    # machine-wide PSI (cgroup v1) from another process: the job itself reads nothing
    v = verdict("starved", agents=agents({"data_wait": 60, "forward": 10}),
                host=host(workers=[0.1, 0.1], io_psi=30, read_mbps=0))  # fmt: skip
    assert bound(v) == "data-input"


def test_stacks_alone_can_name_data_wait():
    v = verdict(
        "starved",
        stacks=stacks([("torch/utils/data/dataloader.py", "_BaseDataLoaderIter.__next__")]),
    )
    assert bound(v) == "data-input"
    assert "agent" in v.principal.missing


def test_comms_from_grad_sync_share():
    v = verdict("compute", agents=agents({"forward": 20, "backward": 20, "grad_sync": 30}, ranks=2))
    assert bound(v) == "comms"


def test_a_slow_rank_explains_the_others_sync_wait_even_when_comms_is_surer():
    parked = stacks([("torch/distributed/distributed_c10d.py", "all_reduce"),
                     ("torch/nn/modules/module.py", "Module._call_impl")])  # fmt: skip
    steps = agents({"forward": 20, "backward": 20, "grad_sync": 5}, ranks=2, slow={1: 40.0})
    v = verdict("compute", agents=steps, stacks=parked)
    comms = next(f for f in v.findings if f.bound == "comms")
    # how sure a finding is never outranks what it costs: the wait is the slow rank's doing
    assert comms.fired and comms.confidence >= v.principal.confidence
    assert bound(v) == "straggler"


def test_a_slow_rank_is_the_straggler_not_comms():
    v = verdict("compute", agents=agents({"forward": 20, "backward": 20, "grad_sync": 5}, ranks=4,
                                         slow={2: 30.0}))  # fmt: skip
    assert bound(v) == "straggler"
    assert v.principal.evidence[0].text.startswith("straggler wait 40% of the step")
    assert "rank 2 works" in v.principal.evidence[1].text
    assert any(f.bound == "comms" for f in v.secondary)


def test_oversubscribed_cpu():
    v = verdict("starved", host=host(cpus=2, running=12, runq=4.0, throttled=0.6))
    assert bound(v) == "cpu-oversubscribed"
    assert "do not add DataLoader workers" in v.principal.levers[1]


def test_checkpoint_spikes_are_side_work():
    spikes = {10: {"checkpoint": 400}, 20: {"checkpoint": 400}}
    steps = agents({"forward": 40, "backward": 45, "optimizer": 5}, spikes=spikes)
    v = verdict("compute", agents=steps)
    assert bound(v) == "side-work"
    assert "checkpoint" in v.principal.evidence[0].text


def test_no_step_for_a_long_time_is_hung_and_names_the_phase():
    v = verdict("compute", agents=agents({"forward": 40, "backward": 40}, since_step_s=300,
                                         open_phase="grad_sync"))  # fmt: skip
    assert bound(v) == "hung"
    assert "in grad_sync" in v.principal.evidence[0].text


def test_a_parked_stack_is_hung_evidence():
    v = verdict(
        "compute",
        stacks=stacks([("torch/distributed/distributed_c10d.py", "all_reduce")], n=12, same=True),
    )
    assert bound(v) == "hung"


def test_memory_near_the_limit():
    v = verdict("compute", host=host(ws_gib=30, limit_gib=32, oom=1))
    assert bound(v) == "host-memory-pressure"
    texts = [e.text for e in v.principal.evidence]
    assert "working set 30.0 GiB of 32.0 GiB limit (94%, > 90%)" in texts
    small = verdict("compute", host=host(ws_gib=0.28, limit_gib=0.3))
    assert "working set 287 MiB of 307 MiB limit (93%, > 90%)" in [
        e.text for f in (small.principal, *small.secondary) for e in f.evidence
    ]


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [("power-throttled", "throttled-power"), ("thermal-throttled", "throttled-thermal"),
     ("membw", "memory-bandwidth"), ("launch-bound", "host-overhead"), ("idle", "idle")],
)  # fmt: skip
def test_gpu_side_classes_from_the_simulated_board(scenario, expected):
    assert bound(verdict(scenario)) == expected


def test_util_high_with_few_sms_busy_is_not_compute_bound():
    v = verdict("launch-bound", agents=agents({"forward": 40, "backward": 40}))
    assert bound(v) == "host-overhead" and not any(f.bound == "gpu-compute" for f in v.secondary)


def test_util_high_while_a_collective_hangs_is_not_compute_bound():
    v = verdict(
        "compute",
        agents=agents({"forward": 40, "backward": 40}, since_step_s=600, open_phase="grad_sync"),
    )
    assert bound(v) == "hung"


PARKED = [("torch/distributed/distributed_c10d.py", "all_reduce")]


def test_a_parked_stack_after_steps_stopped_is_hung_before_the_60_s_floor():
    # 80-ms steps stopped 15 s ago and every dump shows all_reduce: many median steps, no progress
    v = verdict(
        "compute",
        agents=agents({"forward": 40, "backward": 40}, since_step_s=15),
        stacks=stacks(PARKED, n=12, same=True),
    )
    assert bound(v) == "hung"
    assert {e.source for e in v.principal.evidence} == {"agent", "stacks"}


def test_the_process_not_in_the_collective_is_named_with_its_own_frame():
    parked = stacks(PARKED, n=12, same=True)
    frames = (Frame("Condition.wait", "threading.py", 355), Frame("read_shard", "train.py", 27))
    stuck = ThreadStack(0, "MainThread", False, frames, *classify(frames, False))
    samples = tuple(
        StacksSample(100, s.t, 0.0, (*s.processes, ProcessStacks(101, "rank", (stuck,))))
        for s in parked.samples
    )
    v = verdict("compute", stacks=Window(samples, 0.0, 12.0))
    assert bound(v) == "hung"
    assert v.principal.summary == (
        "no progress: pid 101 is not in the all_reduce that pid 100 waits in: it is blocked "
        "in Condition.wait at train.py:27"
    )


def test_ranks_waiting_on_a_rank_that_still_works_is_not_hung():
    parked = stacks(PARKED, n=12, same=True)
    busy = ThreadStack(0, "MainThread", True, (Frame("save", "torch/serialization.py", 1),),
                       "checkpoint save", None)  # fmt: skip
    samples = tuple(
        StacksSample(100, s.t, 0.0, (*s.processes, ProcessStacks(101, "rank", (busy,))))
        for s in parked.samples
    )
    v = verdict("compute", stacks=Window(samples, 0.0, 12.0))
    assert bound(v) != "hung" and not any(f.bound == "hung" for f in v.secondary)


@pytest.mark.parametrize("since_step_s", [0.5, 11])
def test_a_parked_stack_while_steps_still_finish_is_not_hung(since_step_s):
    # 0.5 s: the agent saw a step finish just now; 11 s: under 3 of these 4-s steps
    v = verdict(
        "compute",
        agents=agents({"forward": 2000, "backward": 2000}, since_step_s=since_step_s),
        stacks=stacks(PARKED, n=12, same=True),
    )
    assert bound(v) != "hung" and not any(f.bound == "hung" for f in v.secondary)


def test_missing_inputs_are_said():
    windows, devices = gpu("starved")
    v, _ = evaluate(reduce_windows([], []), now=1.0)
    assert v.principal is None and "not enough data" in v.note
    v, _ = evaluate(reduce_windows(windows, devices), now=1.0)
    assert v.inputs == ("NVML",)
    assert all(
        "agent" in f.missing or "agent" not in {e.source for e in f.evidence} for f in v.findings
    )


def test_hysteresis_needs_sustained_evidence_to_switch():
    windows, devices = gpu("starved")
    sync = {"forward": 20, "backward": 20, "grad_sync": 30}
    comms_only = reduce_windows(windows, devices, agents=agents(sync, ranks=2))
    loader = "torch/utils/data/dataloader.py"
    waits = stacks(
        [
            (loader, "_BaseDataLoaderIter.__next__"),
            (loader, "_MultiProcessingDataLoaderIter._get_data"),
        ]
    )
    steps = agents({"data_wait": 60, "forward": 10, "grad_sync": 25}, ranks=2)
    both = reduce_windows(windows, devices, agents=steps, stacks=waits)
    v, state = evaluate(comms_only, now=0.0)
    assert bound(v) == "comms" and v.since == 0.0
    for t in (1.0, 2.0):  # data-input leads now, but comms still fires: no flip yet
        v, state = evaluate(both, now=t, state=state)
        assert bound(v) == "comms" and any(f.bound == "data-input" for f in v.secondary)
    v, state = evaluate(both, now=3.0, state=state)
    assert bound(v) == "data-input" and v.since == 3.0


def test_a_principal_whose_evidence_is_gone_yields_at_once():
    windows, devices = gpu("compute")
    healthy = reduce_windows(windows, devices, agents=agents({"forward": 40, "backward": 50}))
    starved = reduce_windows(windows, devices, agents=agents({"data_wait": 60, "forward": 10}))
    v, state = evaluate(healthy, now=0.0)
    assert bound(v) == "gpu-compute"
    v, state = evaluate(starved, now=1.0, state=state)
    assert bound(v) == "data-input" and v.principal.confidence > 0


STARVED = {"data_wait": 60, "forward": 10}
FOUR_WORKERS = {"dataloader": M({"num_workers": 4, "pin_memory": True, "persistent_workers": True})}


def test_workers_filling_the_limit_explain_the_slow_loader():
    # the data-input lever would be "more workers": each one another copy, then an OOM kill
    v = verdict("starved", agents=agents(STARVED, fingerprint=FOUR_WORKERS),
                host=host(workers=[0.1] * 4, ws_gib=7.6, limit_gib=8))  # fmt: skip
    assert bound(v) == "host-memory-pressure"
    assert v.principal.summary.startswith("data wait ")  # the slice it stretches leads
    assert v.principal.evidence[1].text == (
        "working set 7.6 GiB of 8.0 GiB limit (95%, > 90%), "
        "4 DataLoader workers (each may copy the dataset)"
    )
    assert (
        v.principal.levers[0]
        == "DataLoader num_workers=4: fewer (each may hold its own copy of the dataset)"
    )
    data = next(f for f in v.secondary if f.bound == "data-input")
    assert data.levers[0].startswith("DataLoader num_workers=4: try 8;")
    assert data.levers[0].endswith("only after freeing memory (working set at 95% of the limit)")


def test_reclaim_stalls_explain_a_slow_loader_without_workers():
    v = verdict("starved", agents=agents(STARVED),
                host=host(ws_gib=7.6, limit_gib=8, limit_hits=40, mem_psi=25))  # fmt: skip
    assert bound(v) == "host-memory-pressure"
    texts = [e.text for e in v.principal.evidence]
    assert "limit hit 40 times/s: the kernel reclaims" in texts
    assert "memory pressure 25% (> 10%)" in texts
    assert not any("workers" in lever for lever in v.principal.levers[:1])


def test_near_the_limit_without_workers_or_stalls_is_a_warning_beside_data_input():
    v = verdict("starved", agents=agents(STARVED), host=host(ws_gib=7.6, limit_gib=8))
    assert bound(v) == "data-input"
    assert any(f.bound == "host-memory-pressure" for f in v.secondary)


def test_machine_wide_memory_pressure_far_from_the_limit_is_not_the_jobs():
    v = verdict("starved", agents=agents(STARVED), host=host(ws_gib=2, limit_gib=8, mem_psi=40))
    assert bound(v) == "data-input"
    mem = next(f for f in v.findings if f.bound == "host-memory-pressure")
    assert not mem.fired
    assert [e.supports for e in mem.evidence] == [False]


def test_a_throttled_quota_explains_a_starved_loader():
    # "more workers" would add threads to the fight for the quota
    crowded = host(cpus=1, running=6, runq=2.5, workers=[0.3, 0.3], throttled=0.8)
    v = verdict("starved", agents=agents(STARVED), host=crowded)
    assert bound(v) == "cpu-oversubscribed"
    assert any(f.bound == "data-input" for f in v.secondary)
    assert v.principal.levers[1] == "do not add DataLoader workers: they compete for the same CPUs"


def test_a_throttled_quota_is_the_cause_under_the_loops_own_time():
    # a half-CPU quota stops the training thread in every slice alike: the loop's own Python,
    # the largest loss, is stretched by the fight, and capping the threads is the lever
    v = verdict("starved", agents=agents({"forward": 30, "backward": 40, "other": 25}),
                host=host(cpus=0.5, running=4, runq=2.0, throttled=0.9))  # fmt: skip
    assert bound(v) == "cpu-oversubscribed", v
    assert v.principal.summary.startswith("the loop's own Python "), v.principal.summary
    assert "because threads fight over too few CPUs" in v.principal.summary
    assert any(f.bound == "host-overhead" for f in v.findings)


def test_workers_busy_on_shared_cores_are_cpu_transform_and_get_no_wait_lever():
    # 70% of a core each (the machine's cores are shared): computing, not waiting
    loader = {"dataloader": M({"num_workers": 2, "pin_memory": True, "persistent_workers": True})}
    v = verdict("starved", agents=agents(STARVED, fingerprint=loader),
                host=host(cpus=2, workers=[0.7, 0.7]))  # fmt: skip
    assert bound(v) == "data-input/cpu-transform"
    assert "0 of 2 workers at >= 85% of a core, 70% of a core each" in v.principal.evidence[-1].text


WAITING_FOR_A_BATCH = [
    ("torch/utils/data/dataloader.py", "_MultiProcessingDataLoaderIter._get_data")
]


def test_a_loader_that_stopped_delivering_is_hung():
    v = verdict(
        "starved",
        agents=agents(STARVED, since_step_s=15),
        stacks=stacks(WAITING_FOR_A_BATCH, n=12, same=True),
    )
    assert bound(v) == "hung"
    assert "waits in _MultiProcessingDataLoaderIter._get_data" in v.principal.summary
    assert v.principal.levers[1].startswith("DataLoader(timeout=...)")


def test_a_first_batch_that_takes_long_is_not_a_hang():
    # the workers work on the first batch: the main thread's wait is not a stuck loader
    v = verdict("starved", stacks=stacks(WAITING_FOR_A_BATCH, n=12, same=True),
                host=host(workers=[0.9, 0.8]))  # fmt: skip
    assert bound(v) != "hung"


def test_pcie_busy_while_the_sms_wait_is_h2d_from_nvml_alone():
    v = verdict("h2d")
    assert bound(v) == "h2d-copy"
    assert v.principal.evidence[0].text.startswith("PCIe to the GPU ")
    assert "while SMs busy" in v.principal.evidence[0].text


def test_a_starved_gpu_moves_little_over_pcie_and_is_not_h2d():
    assert not next(f for f in verdict("starved").findings if f.bound == "h2d-copy").fired


def test_an_oom_kill_that_ended_the_job_is_said_after_its_running_readings_age_out():
    running = host(ws_gib=31.5, limit_gib=32, oom=0).samples[-1]
    kill = M({"oom_kill": 1, "max": 0})
    cg = dataclasses.replace(running.cgroup, mem_events=kill, mem_events_new=kill)
    gone = dataclasses.replace(running, state="exited", exit_code=-9, processes=(), cgroup=cg)
    only_exited = Window((dataclasses.replace(gone, t=40.0),), 10.0, 40.0)
    v = verdict("idle", host=only_exited)
    assert bound(v) == "host-memory-pressure", v
    assert "1 OOM kill(s) in the cgroup, then the target exited" in [
        e.text for e in v.principal.evidence
    ]


FETCH = ("torch/utils/data/_utils/fetch.py", "_MapDatasetFetcher.fetch")
FWD = ("torch/nn/modules/module.py", "Module._call_impl")


def main_loop(fetches: int, data_ms: float, active: bool = True, holding: str | None = None):
    """num_workers=0: the agent's batch wait of ``data_ms`` in 100 ms steps, and 20 stack
    samples of the main thread, ``fetches`` of them in the dataset's fetch."""
    sig = reduce_windows(
        [],
        [],
        agents=agents({"data_wait": data_ms, "forward": 100 - data_ms}),
        host=host(cpus=2, running=1, runq=0.2),
        stacks=stacks([FETCH] * fetches + [FWD] * (20 - fetches), n=20, active=active),
    )
    return dataclasses.replace(sig, holding=holding)


def test_a_main_thread_that_computes_the_whole_wait_is_cpu_transform_however_short_the_wait():
    """A 12% wait, all of it in the dataset's fetch with the thread running: the main thread
    makes the batches (the share of the step is the data slice's business, not the cause's)."""
    f = data_input(main_loop(fetches=3, data_ms=12))
    assert f.bound == "data-input/cpu-transform"
    assert f.evidence[-1].text == (
        "main thread in the dataset's fetch for 100% of the batch wait (>= 50%; 3 of 20 stack"
        " samples), running in 100% of them: it computes each batch"
    )


def test_a_main_thread_asleep_in_the_fetch_or_seldom_seen_there_names_no_transform():
    assert data_input(main_loop(fetches=10, data_ms=50, active=False)).bound == "data-input"
    assert data_input(main_loop(fetches=2, data_ms=10)).bound == "data-input"  # 2 samples


def test_a_main_thread_that_prepares_its_batches_keeps_cpu_transform_in_its_band():
    """The fetch's share of the wait hovers near its threshold (8 of 20 samples, 40%, of an
    85% wait: 47% of it); once cpu-transform is shown it holds down to the band (35%)."""
    assert data_input(main_loop(fetches=8, data_ms=85)).bound == "data-input"
    held = main_loop(fetches=8, data_ms=85, holding="data-input/cpu-transform")
    assert data_input(held).bound == "data-input/cpu-transform"


COMMS_STEP = {"forward": 20, "backward": 20, "grad_sync": 30}
SETUPS = {
    "DDP": {"kind": "DDP", "bucket_cap_mb": 25.0, "gradient_as_bucket_view": False,
            "static_graph": False, "find_unused_parameters": False},
    "FSDP2": {"kind": "FSDP2", "shard_size": 2, "hsdp": False, "reshard_after_forward": True},
    "FSDP1": {"kind": "FSDP1", "sharding_strategy": "FULL_SHARD", "backward_prefetch": None,
              "forward_prefetch": False},
    "DeepSpeed": {"kind": "DeepSpeed", "zero_stage": 2, "overlap_comm": False,
                  "reduce_bucket_size": 500000000},
    "collectives": {"kind": "collectives"},
}  # fmt: skip
WRAPPER_WORDS = {"DDP": "bucket_cap_mb", "FSDP2": "reshard_after_forward", "FSDP1":
                 "sharding_strategy", "DeepSpeed": "overlap_comm"}  # fmt: skip
"""Each wrapper's own knob: named for that wrapper only (moving to DDP may be said to a loop
that all-reduces by itself; DDP's bucket size may not)."""


@pytest.mark.parametrize("kind", [*SETUPS, None])
def test_comms_levers_name_only_the_jobs_own_wrapper_with_its_values(kind):
    windows, devices = gpu("compute")
    fp = {"parallel": M(SETUPS[kind])} if kind else {}
    steps = agents(COMMS_STEP, ranks=2, fingerprint=fp)
    v, _ = evaluate(reduce_windows(windows, devices, agents=steps), now=0.0)
    assert bound(v) == "comms"
    levers = " | ".join(v.principal.levers)
    for other, word in WRAPPER_WORDS.items():
        if other != kind:
            assert word not in levers, (kind, levers)  # a lever for a setup the job lacks
    expected = {
        "DDP": "DDP bucket_cap_mb=25 -> 50",
        "FSDP2": "fully_shard(reshard_after_forward=False)",
        "FSDP1": "FSDP sharding_strategy=FULL_SHARD -> SHARD_GRAD_OP",
        "DeepSpeed": "DeepSpeed zero_optimization.overlap_comm=false -> true",
        "collectives": "your loop calls the collectives itself",
        None: "gradient accumulation",
    }[kind]
    assert expected in levers, levers
    assert "NCCL" not in levers  # no backend known: NCCL's own advice waits for it


def test_nccls_own_advice_only_for_a_job_on_nccl():
    windows, devices = gpu("compute")
    for backend, said in (("gloo", False), ("nccl", True)):
        fp = {"parallel": M({**SETUPS["DDP"], "backend": backend})}
        steps = agents(COMMS_STEP, ranks=2, fingerprint=fp)
        v, _ = evaluate(reduce_windows(windows, devices, agents=steps), now=0.0)
        assert ("NCCL_DEBUG=INFO" in " ".join(v.principal.levers)) is said, v.principal.levers
