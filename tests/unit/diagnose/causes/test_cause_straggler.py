"""The straggler's cause (``diagnose/causes/straggler.py``) through the whole verdict: which
part of the slow rank's own work is longer, and for its compute what differs about it."""

from __future__ import annotations

from types import MappingProxyType as M

from builders import agent, device, gpu_sample, host_at, step
from builders import proc as a_proc

from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.causes.straggler import BALANCE, HARDWARE, OWN_CORES
from gputop.model import Window
from gputop.model.gpu import GpuProcess
from gputop.model.host import ProcSample, Sharer
from gputop.model.steps import AgentsSample
from gputop.ui.panes.verdict import reasoning_text

BASE = {"forward": 20.0, "backward": 20.0, "optimizer": 2.0}
SLOW_MS = 30.0


def ranks(extra: dict[str, float], inputs: tuple[int, int] = (4096, 4096),
          fingerprint=None) -> AgentsSample:  # fmt: skip
    """Two DDP ranks (pids 100, 101) of 30 steps: rank 1 spends ``extra`` more ms per step in
    its own phases, rank 0 waits that long in grad_sync."""
    out = []
    for r in (0, 1):
        phases = dict(BASE)
        if r == 1:
            for name, ms in extra.items():
                phases[name] = phases.get(name, 0.0) + ms
        else:
            phases["grad_sync"] = sum(extra.values())
        gc_ms = phases.pop("gc", 0.0)  # the collector's time is no phase: it pauses the step
        steps = tuple(
            step(i, int(i * 1e9), phases, dur_ms=sum(phases.values()) + gc_ms + 0.5,
                 inputs=inputs[r], gc_ns=int(gc_ms * 1e6), gc_full=1 if gc_ms else 0)
            for i in range(30)
        )  # fmt: skip
        fp = {"fingerprint": fingerprint} if fingerprint is not None else {}
        out.append(agent(100 + r, steps, rank=r, world_size=2, **fp))
    return AgentsSample(target=50, t=1.0, wall=0.0, agents=tuple(out))


def host(runq: tuple[float, float], sharers: tuple[Sharer, ...] = ()) -> Window:
    """Both ranks' processes with their run-queue wait (seconds per second), and the busy
    processes outside the job."""

    def proc(r: int) -> ProcSample:
        return a_proc(100 + r, "rank", ppid=50, runq_wait=runq[r], rank=r)

    procs = (proc(0), proc(1))
    samples = tuple(host_at(t, procs, pid=50, sharers=sharers) for t in range(5))
    return Window(samples, 0.0, 5.0)


def gpus(clocks: tuple[int, int], stranger: int | None = None) -> list[Window]:
    """Two GPUs, rank 0 (pid 100) on GPU 0 and rank 1 (pid 101) on GPU 1, each at its SM
    clock (the power cap named when under the maximum); ``stranger`` also on GPU 1."""

    def on(i: int) -> tuple[GpuProcess, ...]:
        pids = (100 + i, *((stranger,) if stranger and i == 1 else ()))
        return tuple(GpuProcess(p, p, None, 1 << 30, None, None) for p in pids)

    return [
        Window(tuple(gpu_sample(i, float(t), ("sw_power_cap",) if clocks[i] < 1980 else (),
                                sm_clock_mhz=clocks[i], processes=on(i))
                     for t in range(6)), 0.0, 6.0)
        for i in (0, 1)
    ]  # fmt: skip


def principal(agents: AgentsSample, runq: tuple[float, float] = (0.02, 0.03), board=None,
              sharers: tuple[Sharer, ...] = ()):  # fmt: skip
    windows = board or []
    devices = [device(i) for i in range(len(windows))]
    sig = reduce_windows(windows, devices, agents=agents, host=host(runq, sharers))
    v, _ = evaluate(sig, now=10.0)
    assert v.principal is not None and v.principal.bound == "straggler", v.principal
    return v.principal


def test_larger_inputs_are_the_cause_and_balancing_the_lever():
    p = principal(ranks({"forward": 15.0, "backward": 15.0}, inputs=(4096, 8192)))
    assert p.cause.text == (
        "rank 1's inputs are 2.0x the others': its compute takes 1.7x theirs (8,192 vs 4,096 "
        "tensor elements a step)"
    )
    assert p.levers[0] == BALANCE
    # sized by the rank differential: rank 1's 30 ms of extra compute is all of the others' wait
    assert p.saving.condition == "if rank 1's extra 30 ms a step went (the others wait 30 ms)"
    assert 1.3 < p.saving.speedup < 1.8  # 30 ms of a ~73 ms step
    assert p.saving.low <= p.saving.share <= p.saving.high


def test_a_rank_waiting_for_its_cpus_shares_them():
    p = principal(ranks({"forward": SLOW_MS}), runq=(0.02, 0.6))
    assert p.cause.text.startswith("rank 1's CPUs are shared: its compute takes 1.7x theirs, its")
    assert "threads wait 0.60 s a second for a CPU (the others 0.02)" in p.cause.text
    assert p.levers[0] == OWN_CORES


def test_the_process_outside_the_job_on_its_cpus_is_named_and_moved():
    shipper = Sharer(4242, "python", "python ship_logs.py", 0.97, (3,), shares_with=(101,))
    elsewhere = Sharer(4343, "make", "make -j", 0.9, (0,), shares_with=(100,))
    p = principal(ranks({"forward": SLOW_MS}), runq=(0.02, 0.6), sharers=(elsewhere, shipper))
    assert p.cause.text.endswith("; on them: pid 4242 (python ship_logs.py) 97% of a core")
    assert p.levers[0].startswith("move pid 4242 (python) off rank 1's CPUs")
    assert p.levers[1] == OWN_CORES
    assert "4343" not in " ".join(e.text for e in p.cause.evidence)


def test_cpus_shared_lead_slightly_larger_inputs_and_the_inputs_are_said_beside():
    # a 1.6x stretch from waiting for CPUs against 1.3x more inputs
    p = principal(ranks({"forward": SLOW_MS}, inputs=(4096, 5325)), runq=(0.02, 0.6))
    assert p.cause.text.startswith("rank 1's CPUs are shared"), p.cause.text
    assert p.cause.evidence[-1].text.startswith("also: rank 1 is given 5,325 input elements")
    assert p.levers[0] == OWN_CORES


def test_much_larger_inputs_lead_a_little_cpu_wait():
    # 2.5x the inputs against a 1.2x stretch from waiting for CPUs
    p = principal(ranks({"forward": SLOW_MS}, inputs=(4096, 10240)), runq=(0.02, 0.2))
    assert p.cause.text.startswith("rank 1's inputs are 2.5x the others'"), p.cause.text
    assert p.cause.evidence[-1].text.startswith("also: rank 1 run-queue wait 0.20 s/s")
    assert p.levers[0] == BALANCE


def test_slower_compute_with_nothing_else_different_is_the_hardware():
    p = principal(ranks({"forward": SLOW_MS}))
    assert p.cause.text == (
        "rank 1: its compute takes 1.7x theirs with the same inputs and no wait for a CPU: "
        "its hardware or placement"
    )
    assert p.levers[0] == HARDWARE


def test_equal_inputs_do_not_make_it_the_inputs():
    """Inputs 10% larger are within what one shape gives: not the cause."""
    p = principal(ranks({"forward": SLOW_MS}, inputs=(4096, 4500)))
    assert "inputs" not in p.cause.text.split(":")[0]


def test_its_own_garbage_collections_are_named_not_its_compute():
    p = principal(ranks({"gc": SLOW_MS}))
    assert p.cause.text.startswith("rank 1: garbage collection takes 30 ms a step more than on")
    assert "gc.set_threshold(" in p.levers[0]


def test_a_checkpoint_only_one_rank_saves_is_named():
    p = principal(ranks({"checkpoint": SLOW_MS}))
    assert p.cause.text.startswith("rank 1: checkpointing takes 30 ms a step more than on")
    assert "async_save" in p.levers[0]


def test_a_rank_whose_gpu_clocks_lower_is_its_gpu():
    p = principal(ranks({"forward": SLOW_MS}), board=gpus((1980, 1400)))
    said = "rank 1's GPU 1 runs slower: SM clock at 71% of its maximum (the others' 100%; "
    assert p.cause.text.startswith(f"{said}power cap 100% of the time)"), p.cause
    assert p.levers[0] == HARDWARE


def test_a_process_outside_the_job_on_its_gpu_is_named():
    p = principal(ranks({"forward": SLOW_MS}), board=gpus((1980, 1980), stranger=4242))
    assert p.cause.text.startswith("rank 1's GPU 1 is shared: pid 4242, not of the job"), p.cause
    assert p.levers[0].startswith("move pid 4242 off GPU 1")


def loader_ranks(workers: tuple[int, int], data_ms: tuple[float, float], cpu: float,
                 sync_ms: float = 0.0) -> AgentsSample:  # fmt: skip
    """Two ranks with their own DataLoader settings: rank r waits ``data_ms[r]`` for its
    batches (rank 1 computing through ``cpu`` of it), rank 0 waits for rank 1 in grad_sync
    (plus ``sync_ms`` of all-reduce both wait)."""
    out = []
    for r in (0, 1):
        phases = {
            **BASE,
            "data_wait": data_ms[r],
            "grad_sync": sync_ms + max(0.0, data_ms[1] - data_ms[0]) * (r == 0),
        }
        fp = M({"dataloader": M({"num_workers": workers[r]})})
        cpu_ns = int(data_ms[r] * 1e6 * (cpu if r == 1 else 0.05))
        steps = tuple(step(i, int(i * 1e9), phases, data_cpu_ns=cpu_ns) for i in range(30))
        out.append(agent(100 + r, steps, rank=r, world_size=2, fingerprint=fp))
    return AgentsSample(target=50, t=1.0, wall=0.0, agents=tuple(out))  # fmt: skip


def test_a_rank_left_without_workers_is_named_with_the_others_setting():
    p = principal(loader_ranks((1, 0), (1.0, 13.0), cpu=0.95))
    assert p.cause.text == (
        "rank 1 prepares its batches on its training thread (num_workers=0; the other ranks "
        "have 1): it waits for them 12 ms a step more (13 vs 1 ms), computing through 95% of it"
    ), p.cause.text
    assert p.levers[0].startswith("give rank 1's DataLoader workers as the others have "
                                  "(num_workers=1)")  # fmt: skip
    assert p.saving is not None and p.saving.condition == (
        "if rank 1's extra 12 ms a step went (the others wait 12 ms)"
    )


def cpu_host(cpus: float, cores: float) -> Window:
    """Both ranks on ``cpus`` CPUs, each using ``cores`` of them."""
    procs = tuple(a_proc(100 + r, "rank", ppid=50, rank=r, cpu_cores=cores, runq_wait=0.0)
                  for r in (0, 1))  # fmt: skip
    return Window(tuple(host_at(t, procs, cpus, pid=50) for t in range(5)), 0.0, 5.0)


def test_a_worker_with_no_free_cpu_saves_nothing_and_cheaper_batches_come_next():
    """Two ranks that already want both CPUs: rank 1's worker would take its CPU from them."""
    sig = reduce_windows([], [], agents=loader_ranks((1, 0), (1.0, 13.0), cpu=0.95),
                         host=cpu_host(2.0, 1.0))  # fmt: skip
    v, _ = evaluate(sig, now=10.0)
    p = v.principal
    assert p is not None and p.bound == "straggler", p
    assert p.levers[0].startswith("give rank 1's DataLoader workers"), p.levers
    assert p.lever_savings[0] is None  # no CPU for it: nothing it can be said to save
    assert p.levers[1].startswith("make rank 1's batches cheaper to prepare")
    saving = p.lever_savings[1]
    assert saving is not None and saving.condition.startswith("if rank 1's extra 12 ms")
    assert any("the job wants 2.0 of the 2 CPUs it may use (0.0 free)" in e.text
               for e in p.cause.evidence)  # fmt: skip


def test_a_worker_with_part_of_a_cpu_free_saves_that_part():
    """Half a CPU free of 4, a step of ~55 ms: the job's CPU work caps the step at 55 x 3.5/4,
    so the worker saves at most ~7 ms of rank 1's 12."""
    sig = reduce_windows([], [], agents=loader_ranks((1, 0), (1.0, 13.0), cpu=0.95),
                         host=cpu_host(4.0, 1.75))  # fmt: skip
    v, _ = evaluate(sig, now=10.0)
    p = v.principal
    assert p is not None and p.bound == "straggler", p
    first, cheaper = p.lever_savings[0], p.lever_savings[1]
    assert first is not None and cheaper is not None
    assert 0.5 < first.share / cheaper.share < 0.65, (first, cheaper)
    assert "0.5 of the 4 CPUs free" in first.condition


def test_a_straggler_behind_a_larger_comms_wait_still_carries_its_cause():
    """The issue's job: comms the principal (a near tie), the straggler secondary, explained."""
    sig = reduce_windows(
        [],
        [],
        agents=loader_ranks((1, 0), (1.0, 13.0), cpu=0.95, sync_ms=60.0),
        host=host((0.02, 0.03)),
    )
    v, _ = evaluate(sig, now=10.0)
    assert v.principal is not None and v.principal.bound == "comms", v.principal
    (s,) = [f for f in v.secondary if f.bound == "straggler"]
    assert s.cause is not None and s.cause.text.startswith("rank 1 prepares its batches")
    assert s.levers[0].startswith("give rank 1's DataLoader workers")
    assert "    why: rank 1 prepares its batches" in reasoning_text(v)  # the why screen says it


def test_ranks_with_the_same_workers_compare_what_their_workers_use():
    p = principal(loader_ranks((2, 2), (1.0, 13.0), cpu=0.02))
    assert p.cause.text.startswith(
        "rank 1: its 2 DataLoader workers keep it waiting for "
        "batches 12 ms a step more (13 vs 1 ms)"
    ), p.cause.text


def test_an_optimizer_step_longer_than_the_others_is_named_not_the_inputs():
    """Rank 1's forward and backward match the others'; its optimizer step takes 30 ms more
    (a parameter group only it updates): the cause is that step, with the split in evidence."""
    p = principal(ranks({"optimizer": SLOW_MS}))
    assert p.cause.text == (
        "rank 1's optimizer step takes 30 ms a step more than the others' (32 vs 2 ms): its "
        "forward and backward match theirs"
    ), p.cause.text
    assert p.levers[0].startswith("look at what that rank's optimizer step does")
    assert any(e.text.startswith("rank 1's compute against the median other rank's: forward 20 "
                                 "vs 20 ms") for e in p.cause.evidence)  # fmt: skip


def test_a_longer_forward_is_not_the_optimizer():
    p = principal(ranks({"forward": SLOW_MS}))
    assert "optimizer step" not in p.cause.text


def test_a_sharded_optimizer_longer_on_one_rank_gets_the_partition_lever():
    fsdp = M({"parallel": M({"kind": "FSDP2"})})
    p = principal(ranks({"optimizer": SLOW_MS}, fingerprint=fsdp))
    assert p.levers[0].startswith("balance the optimizer's shards"), p.levers
