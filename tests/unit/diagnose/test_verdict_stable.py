"""Issue 15, part 2: stable, fast answers. Warming up rather than idle while a job starts;
conclusions from stacks and host alone (no agent); bands that keep a principal while its
evidence holds; which of cpu-oversubscribed and data-input/cpu-transform is the principal."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType as M

import pytest
from builders import device, gpu_sample, host_at
from builders import proc as a_proc
from test_diagnose import agents, gpu

from gputop.diagnose import evaluate, reduce_windows
from gputop.diagnose.findings import Verdict
from gputop.diagnose.rules import HOLD, SPIKE_TIME, idle, side_work, straggler
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.signals.steps import Spike, StepSignals
from gputop.diagnose.verdict import State
from gputop.headless.loop import Diagnosis, _note
from gputop.model import Window
from gputop.model.host import CgroupSample, ProcSample
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.model.steps import AgentsSample
from gputop.sources.stack_phases import classify

# ---- builders ----


def proc(pid: int, role: str, cpu: float, running: int = 1, runq: float = 0.0) -> ProcSample:
    name = "python" if role == "main" else "pt_data_worker"
    return a_proc(pid, role, name=name, cmdline="", cpu_cores=cpu, threads_running=running,
                  runq_wait=runq, read_bytes_rate=0.0)  # fmt: skip


def tree(*procs: ProcSample, cpus: float = 2.0, n: int = 5, omp: str | None = None) -> Window:
    """Host readings of a tree of processes on ``cpus`` effective CPUs, no cgroup limits."""
    cg = CgroupSample("v2", None, None, None, None, None, None, None, None, 1 << 30, M({}), M({}),
                      0, "cgroup", M({}))  # fmt: skip
    env = M({"OMP_NUM_THREADS": omp}) if omp else M({})
    samples = tuple(host_at(t, procs, cpus, pid=100, effective_cpus_source="affinity",
                            affinity_cpus=2, cgroup=cg, env=env) for t in range(n))  # fmt: skip
    return Window(samples, 0.0, float(n))


def dumps(frames_by_sample: list[tuple[Frame, ...]], active: bool = True) -> Window:
    """The main thread's stacks, one dump a second, each given innermost first."""
    samples = []
    for i, frames in enumerate(frames_by_sample):
        phase, deciding = classify(frames, active)
        t = ThreadStack(100, "MainThread", active, frames, phase, deciding)
        samples.append(StacksSample(100, float(i), 0.0, (ProcessStacks(100, "main", (t,)),)))
    return Window(tuple(samples), 0.0, float(len(samples)))


def run(sig: RuleInputs, n: int = 1) -> tuple[Verdict, State]:
    v, state = None, State()
    for i in range(n):
        v, state = evaluate(sig, now=float(i), state=state)
    assert v is not None
    return v, state


def bound(v: Verdict) -> str | None:
    return v.principal.bound if v.principal else None


def fired(v: Verdict, name: str) -> bool:
    return any(f.bound == name and f.fired for f in v.findings)


IDLE_GPU = gpu("idle")
USER = Frame("<module>", "train.py", 3)
BACKWARD = (Frame("_engine_run_backward", "torch/autograd/graph.py", 1), USER)
FORWARD = (Frame("Module._call_impl", "torch/nn/modules/module.py", 1), USER)
STEP = (Frame("SGD.step", "torch/optim/optimizer.py", 1), USER)
FETCH = (Frame("_MapDatasetFetcher.fetch", "torch/utils/data/_utils/fetch.py", 1), USER)
LOCK = (Frame("Lock.acquire", "threading.py", 1), Frame("update", "train.py", 20), USER)
SLEEP = (Frame("sleep", "train.py", 1),)
SAVE = (Frame("save", "torch/serialization.py", 1), Frame("checkpoint", "train.py", 40), USER)


def with_stacks(frames: list[tuple[Frame, ...]], host: Window | None, active: bool = True):
    return reduce_windows(*IDLE_GPU, host=host, stacks=dumps(frames, active))


# ---- warming up, idle ----


def test_an_agent_with_fewer_than_three_steps_is_warming_up_not_idle():
    few = agents({"forward": 40, "backward": 40})
    main = few.agents[0]
    one = AgentsSample(100, 1.0, 0.0, (dataclasses.replace(main, steps=main.steps[:3]),))
    v, _ = run(reduce_windows(*IDLE_GPU, agents=one, host=tree(proc(100, "main", 0.9))))
    assert v.principal is None and v.warming_up and v.label == "warming up"
    assert v.note == "warming up: 2 of 3 steps seen"  # the first step is start-up, not counted
    assert not fired(v, "idle")


def test_slow_steps_stay_compute_bound_before_the_agent_has_three():
    """5-s steps: the stacks and the CPU said compute before the agent connected; its first
    step must not take that back until its third (measured: gpu-compute, warming up, none)."""
    few = agents({"forward": 2000, "backward": 3000})
    main = few.agents[0]
    one = AgentsSample(100, 1.0, 0.0, (dataclasses.replace(main, steps=main.steps[:2]),))
    frames = [FORWARD, BACKWARD, BACKWARD] * 3
    sig = reduce_windows(*IDLE_GPU, agents=one, host=tree(proc(100, "main", 1.0)),
                         stacks=dumps(frames))  # fmt: skip
    v, _ = run(sig)
    assert bound(v) == "gpu-compute"


def test_a_job_busy_on_cpu_with_a_quiet_gpu_and_no_agent_is_warming_up():
    sig = with_stacks([(Frame("load", "train.py", 5), USER)] * 6, tree(proc(100, "main", 0.9)))
    v, _ = run(sig)
    assert v.principal is None and v.warming_up
    assert v.note.startswith("warming up: GPU still quiet (0%), the job uses 0.9 cores of CPU")
    assert not fired(v, "idle")


def test_a_job_that_does_nothing_is_idle_with_every_sources_word():
    sig = with_stacks([SLEEP] * 6, tree(proc(100, "main", 0.01)), active=False)
    v, _ = run(sig)
    assert bound(v) == "idle"
    texts = [e.text for e in v.principal.evidence]
    assert texts == [
        "GPU busy 0% (< 5%)",
        "the job uses 0.01 cores (< 0.1)",
        "main threads asleep in 100% of stack samples",
    ]


@pytest.mark.parametrize(
    ("frames", "phase"),
    [(BACKWARD, "backward"), (FETCH, "fetch/transform"), (LOCK, "lock wait")],
)
def test_stacks_that_show_work_or_a_wait_are_never_idle(frames, phase):
    # attached by PID to a plain job: no agent, the GPU still quiet, almost no CPU
    v, _ = run(with_stacks([frames] * 6, tree(proc(100, "main", 0.05))))
    idle = next(f for f in v.findings if f.bound == "idle")
    assert not idle.fired
    assert any(phase in e.text and not e.supports for e in idle.evidence)
    assert bound(v) != "idle"


def test_an_exited_target_is_idle():
    v, _ = run(_exited())
    assert bound(v) == "idle"


def _exited() -> RuleInputs:
    from gputop.diagnose.signals.host import HostSignals

    return RuleInputs(None, HostSignals.exited_only(), None, None)


# ---- conclusions from stacks and host alone ----


def test_side_work_from_stacks_alone_when_the_main_thread_saves():
    # 4 dumps of 20 in torch.save: 20% less its sampling error (9 points) is still a loss
    frames = [SAVE, SAVE, FORWARD, BACKWARD, STEP, FORWARD, BACKWARD, STEP, FORWARD, BACKWARD]
    v, _ = run(with_stacks(frames * 2, tree(proc(100, "main", 0.9))))
    assert bound(v) == "side-work"
    assert v.principal.summary.startswith("checkpointing 20% of the step")
    assert v.principal.evidence[1].text == (
        "main thread in torch.save 20% of 20 stack samples (> 10% of the time)"
    )
    assert v.principal.levers[0].startswith("checkpoint less often")


DECORATED = (
    Frame("Module._call_impl", "torch/nn/modules/module.py", 1),
    Frame("score", "train.py", 30),
    Frame("decorate_context", "torch/utils/_contextlib.py", 116),
    USER,
)
NAMED = (Frame("Module._call_impl", "torch/nn/modules/module.py", 1),
         Frame("run_validation", "train.py", 30), USER)  # fmt: skip


@pytest.mark.parametrize("frames", [DECORATED, NAMED], ids=["no_grad decorator", "named"])
def test_an_eval_pass_is_its_own_stack_phase_and_side_work(frames):
    assert classify(frames, True)[0] == "evaluation"
    train = [FORWARD, BACKWARD, STEP] * 3
    v, _ = run(with_stacks([*train, frames, frames, frames], tree(proc(100, "main", 0.9))))
    assert bound(v) == "side-work"
    assert v.principal.summary.startswith("evaluation 25% of the step")
    assert "in an eval pass or logging 25% of 12 stack samples" in v.principal.evidence[1].text


def test_training_functions_are_not_eval_even_inside_a_train_and_evaluate():
    frames = (Frame("Module._call_impl", "torch/nn/modules/module.py", 1),
              Frame("train_step", "train.py", 9),
              Frame("train_and_evaluate", "train.py", 90))  # fmt: skip
    assert classify(frames, True)[0] == "forward"
    fsdp = (Frame("Module._call_impl", "torch/nn/modules/module.py", 1),
            Frame("_pre_forward", "torch/distributed/fsdp/_runtime_utils.py", 5),
            Frame("decorate_context", "torch/utils/_contextlib.py", 116), USER)  # fmt: skip
    assert classify(fsdp, True)[0] == "forward"
    assert classify((Frame("max_val", "train.py", 1), USER), True)[0] == "user code"


def test_gpu_compute_from_stacks_and_cpu_without_the_agent():
    frames = [FORWARD, BACKWARD, BACKWARD, STEP, USER and (USER,)] * 2
    v, _ = run(with_stacks(frames, tree(proc(100, "main", 0.95))))
    assert bound(v) == "gpu-compute"
    texts = [(e.text, e.supports) for e in v.principal.evidence]
    assert ("main threads in forward / backward / optimizer 80% of 10 stack samples (>= 70%)",
            True) in texts  # fmt: skip
    assert ("the job uses 0.9 cores of CPU (>= 0.5)", True) in texts
    assert any(t.startswith("GPU busy only 0%") and not s for t, s in texts)  # shown, outweighed


def test_stacks_in_the_model_with_an_idle_cpu_are_not_gpu_compute():
    v, _ = run(with_stacks([FORWARD, BACKWARD] * 5, tree(proc(100, "main", 0.05))))
    assert not fired(v, "gpu-compute")


def test_a_few_stack_samples_are_not_read_as_shares():
    v, _ = run(with_stacks([FETCH, FETCH], tree(proc(100, "main", 0.9))))
    assert not fired(v, "data-input") and v.warming_up


def test_a_gpu_that_got_busy_lately_is_compute_bound_before_the_window_fills():
    quiet, devices = gpu("idle")
    busy, _ = gpu("compute")
    # 20 readings 1.5 s apart: the first 17 quiet, the last 3 (4.5 s) busy
    windows = [
        Window((*q.samples[:17], *b.samples[17:]), 0.0, q.end)
        for q, b in zip(quiet, busy, strict=True)
    ]
    sig = reduce_windows(windows, devices, agents=agents({"forward": 40, "backward": 50}))
    assert sig.gpu.util < 50 and sig.gpu.util_recent > 90
    v, _ = run(sig)
    assert bound(v) == "gpu-compute"
    assert "over the last 3 s" in v.principal.evidence[1].text


# ---- bands: a principal stays while its evidence holds ----


def _spiky(excess_share: float) -> RuleInputs:
    """50 steps of 100 ms and 2 eval spikes whose excess is ``excess_share`` of the time."""
    extra = excess_share * 5000 / (1 - excess_share) / 2
    spikes = (Spike(10, 100 + extra, "eval_log"), Spike(35, 100 + extra, "eval_log"))
    st = StepSignals(ranks=1, steps=50, median_ms=100, shares={"forward": 0.5, "backward": 0.45},
                     spikes=spikes, open_phase=None, open_age_s=None, since_step_s=0.05,
                     fingerprint=M({}))  # fmt: skip
    return RuleInputs(None, None, st, None)


def test_side_work_holds_in_its_band_and_yields_below_it():
    v, state = run(_spiky(0.06))
    assert bound(v) == "side-work"
    text = v.principal.evidence[0].text
    assert "2 of 50 steps over 1.5x the median (100 ms), 6% of the time (> 5%)" in text
    # a spike leaves the window: 4.5%, under the threshold but in the band
    v, state = evaluate(_spiky(0.045), now=1.0, state=state)
    assert bound(v) == "side-work" and "4.5% of the time (> 3.5%)" in v.principal.evidence[0].text
    assert not evaluate(_spiky(0.045), now=1.0)[0].principal  # not held: not fired
    v, state = evaluate(_spiky(SPIKE_TIME * HOLD * 0.9), now=2.0, state=state)
    assert v.principal is None  # under the band: gone at once


def test_the_band_is_carried_by_the_state_so_replay_recomputes_it():
    seq = [_spiky(x) for x in (0.06, 0.045, 0.04, 0.045, 0.02, 0.045)]

    def play() -> list[str | None]:
        state, out = State(), []
        for i, sig in enumerate(seq):
            v, state = evaluate(sig, now=float(i), state=state)
            out.append(bound(v))
        return out

    first = play()
    assert first == ["side-work"] * 4 + [None, None]
    assert play() == first


def test_noise_spikes_in_the_models_own_phases_are_not_side_work():
    spikes = tuple(Spike(i, 180, "backward") for i in range(0, 50, 6))
    st = StepSignals(ranks=1, steps=50, median_ms=100, shares={"forward": 0.5, "backward": 0.45},
                     spikes=spikes, open_phase=None, open_age_s=None, since_step_s=0.05,
                     fingerprint=M({}))  # fmt: skip
    v, _ = run(RuleInputs(None, None, st, None))
    assert not fired(v, "side-work")


# ---- cpu-oversubscribed or data-input/cpu-transform ----

TWO_WORKERS = {"dataloader": M({"num_workers": 2, "pin_memory": True, "persistent_workers": True})}
STARVED = {"data_wait": 60, "forward": 10}


def _loader(host: Window, fingerprint: dict = TWO_WORKERS) -> Verdict:
    sig = reduce_windows(*gpu("starved"), agents=agents(STARVED, fingerprint=fingerprint),
                         host=host)  # fmt: skip
    return run(sig, n=4)[0]


def test_workers_that_saturate_two_cpus_are_cpu_transform_with_oversubscription_secondary():
    # two pegged workers and the main process on two CPUs: one runnable thread each (and the
    # main process's pin-memory thread): no pool
    host = tree(proc(100, "main", 0.3, running=2, runq=0.4),
                proc(200, "worker", 0.8, running=1, runq=0.5),
                proc(201, "worker", 0.8, running=1, runq=0.5))  # fmt: skip
    v = _loader(host)
    assert bound(v) == "data-input/cpu-transform"
    assert any(f.bound == "cpu-oversubscribed" for f in v.secondary)
    assert v.principal.explains == ("cpu-oversubscribed",)
    assert v.principal.levers[0].startswith("make each batch cheaper to prepare")
    assert "already want 3.3 of the 2-CPU machine's CPUs" in v.principal.levers[0]
    assert v.principal.levers[1] == "do not add DataLoader workers: the CPUs are saturated"


def test_workers_squeezed_by_a_neighbour_still_want_their_cores():
    # another job takes a core: each worker gets 45% of one but waits as long for the rest
    host = tree(proc(100, "main", 0.1), proc(200, "worker", 0.45, runq=0.5),
                proc(201, "worker", 0.45, runq=0.5))  # fmt: skip
    v = _loader(host)
    assert bound(v) == "data-input/cpu-transform"
    assert "wanting 95% with the run-queue wait" in v.principal.evidence[-1].text


def test_intra_op_pools_that_crowd_the_cpus_make_oversubscription_the_principal():
    # the main process runs four intra-op threads on two CPUs beside two computing workers
    host = tree(proc(100, "main", 0.9, running=4, runq=2.0),
                proc(200, "worker", 0.5, running=1, runq=0.5),
                proc(201, "worker", 0.5, running=1, runq=0.5))  # fmt: skip
    v = _loader(host)
    assert bound(v) == "cpu-oversubscribed"
    assert any(f.bound == "data-input/cpu-transform" for f in v.secondary)
    assert v.principal.levers[1] == "do not add DataLoader workers: they compete for the same CPUs"


def test_torch_threads_configured_past_the_cpus_count_as_pools():
    fp = {**TWO_WORKERS, "intra_op_threads": 8}
    host = tree(proc(100, "main", 0.3, running=2, runq=0.4),
                proc(200, "worker", 0.8, running=1, runq=0.5),
                proc(201, "worker", 0.8, running=1, runq=0.5))  # fmt: skip
    v = _loader(host, fingerprint=fp)
    assert bound(v) == "cpu-oversubscribed"


# ---- outputs ----


def test_the_timeline_has_a_warming_up_line_then_the_bound():
    from types import SimpleNamespace

    out = Diagnosis(started=0.0)
    warm = Verdict(None, (), (), None, "warming up: 1 of 3 steps seen")
    warm2 = Verdict(None, (), (), None, "warming up: 2 of 3 steps seen")
    none = Verdict(None, (), (), None, "no bound stands out yet")
    for i, v in enumerate((warm, warm2, none)):
        state = SimpleNamespace(stacks=None, host=None, verdict=v, shifts=(), run=None,
                                comparison=None, shift_change=None,
                                point=SimpleNamespace(now=float(i)), inputs=None)  # fmt: skip
        _note(out, state, "gpu")
    assert [(e["t_s"], e["bound"], e["note"]) for e in out.timeline] == [
        (0.0, None, "warming up: 1 of 3 steps seen"),
        (2.0, None, "no bound stands out yet"),
    ]


def test_the_good_case_waits_for_the_sources_that_could_show_a_bottleneck():
    # a busy GPU on the first dumps of a loop that prepares its own batches: gpu-compute would
    # be the answer for two seconds, then data-input; it waits for STACK_MIN dumps instead
    windows, devices = gpu("compute")
    early = reduce_windows(windows, devices, host=tree(proc(100, "main", 0.9)),
                           stacks=dumps([FORWARD, FETCH]))  # fmt: skip
    assert not fired(run(early)[0], "gpu-compute")
    six = dumps([FORWARD, FETCH, FETCH, FETCH, FORWARD, FETCH])
    later = reduce_windows(windows, devices, host=tree(proc(100, "main", 0.9)), stacks=six)
    v, _ = run(later)
    assert bound(v) == "data-input/cpu-transform" and fired(v, "gpu-compute")
    steps = agents({"forward": 40, "backward": 50})
    two = dataclasses.replace(steps.agents[0], steps=steps.agents[0].steps[:2])
    first = AgentsSample(100, 1.0, 0.0, (two,))
    assert not fired(run(reduce_windows(windows, devices, agents=first))[0], "gpu-compute")


def test_an_eval_every_100_steps_stays_side_work_as_the_window_slides():
    # 20-ms steps, a 300-ms eval pass every 100 steps (13% of the time): the 50-step statistics
    # window holds no eval half the time; the spikes' window (512 steps, 120 s) always does
    from gputop.diagnose.rules import side_work
    from gputop.diagnose.signals.steps import step_signals
    from gputop.model.steps import StepRecord

    def record(i: int) -> StepRecord:
        ph = {"forward": 8.0, "backward": 10.0, "optimizer": 2.0}
        if i % 100 == 99:
            ph["eval_log"] = 300.0
        ns = M({k: int(v * 1e6) for k, v in ph.items()})
        return StepRecord(i, int(i * 25e6), int(sum(ph.values()) * 1e6), ns)

    history = [record(i) for i in range(600)]
    base = agents({"forward": 8}).agents[0]
    state, shown = State(), []
    for n in range(300, 600, 9):
        a = dataclasses.replace(base, steps=tuple(history[max(0, n - 512) : n]))
        st = step_signals(AgentsSample(100, 1.0, 0.0, (a,)))
        assert side_work(RuleInputs(None, None, st, None)).fired, n
        v, state = evaluate(RuleInputs(None, None, st, None), now=float(n), state=state)
        shown.append(bound(v))
    assert set(shown) == {"side-work"}


def test_the_verdict_line_tags_a_job_warming_up():
    from rich.style import Style

    from gputop.ui.panes.verdict import verdict_lines

    warm = Verdict(None, (), (), None, "warming up: 1 of 3 steps seen")
    (line,) = verdict_lines(warm, 1.0, lambda _: Style(), 120)
    assert line.plain == " verdict  WARMING UP  1 of 3 steps seen"
    (line,) = verdict_lines(Verdict(None, (), (), None, "no bound stands out yet"), 1.0,
                            lambda _: Style(), 120)  # fmt: skip
    assert line.plain == " verdict no bound stands out yet"


def test_a_main_thread_parked_on_a_lock_is_neither_idle_nor_warming_up():
    v, _ = run(with_stacks([LOCK] * 6, tree(proc(100, "main", 0.0))))
    assert v.principal is None and not v.warming_up
    # five dumps on one lock, nothing else moving: said at once, called hung only at 10 s
    assert v.note.startswith("no progress for 5 s: pid 100 ")
    assert v.note.endswith("(hung after 10 s)")


def test_idle_waits_for_every_source_present_to_say_so():
    # the host's first reading has no CPU rate yet: a quiet GPU alone does not make it idle
    first = tree(dataclasses.replace(proc(100, "main", 0.0), cpu_cores=None))
    v, _ = run(reduce_windows(*IDLE_GPU, host=first))
    assert not fired(v, "idle")
    assert bound(run(reduce_windows(*IDLE_GPU))[0]) == "idle"  # the GPU is all there is


def test_between_pools_and_transform_the_shown_one_holds():
    # a torch pool beside two computing workers on two CPUs: 2 runnable threads beyond one per
    # process, 3 more runnable threads than CPUs; the pools just clear the bar, not its band
    from gputop.diagnose.rules import pools_crowd

    host = tree(proc(100, "main", 0.8, running=3, runq=1.2),  # 2 beyond one: pool + pin thread
                proc(200, "worker", 0.5, running=1, runq=0.4),
                proc(201, "worker", 0.5, running=1, runq=0.4))  # fmt: skip
    sig = reduce_windows(*gpu("starved"), agents=agents(STARVED, fingerprint=TWO_WORKERS),
                         host=host)  # fmt: skip
    assert pools_crowd(sig)
    assert not pools_crowd(dataclasses.replace(sig, holding="data-input/cpu-transform"))
    assert pools_crowd(dataclasses.replace(sig, holding="cpu-oversubscribed"))


def test_computing_workers_that_fill_the_cpus_are_not_told_to_add_or_drop_workers():
    from gputop.diagnose.bound_levers import data_input

    host = tree(proc(100, "main", 0.2), proc(200, "worker", 0.5), proc(201, "worker", 0.5))
    sig = reduce_windows(*gpu("starved"), agents=agents(STARVED, fingerprint=TWO_WORKERS),
                         host=host)  # fmt: skip
    assert data_input(sig, None)[0].startswith(
        "DataLoader num_workers=2 already fills the 2-CPU machine: more workers would share"
    )


def _idle_gpu(seconds: float):
    """An idle H100's readings every half second for ``seconds``."""
    samples = tuple(
        gpu_sample(0, t / 2, reasons=("gpu_idle",), util_gpu_pct=0, sm_active_pct=0.0, power_w=70.0)
        for t in range(int(seconds * 2) + 1)
    )
    return [Window(samples, 0.0, seconds)], [device(0)]


def test_a_quiet_gpu_alone_in_its_first_seconds_is_not_idle():
    # attached: the GPU's first readings come before the host's and the stacks'
    windows, devices = _idle_gpu(seconds=1.0)
    assert not idle(reduce_windows(windows, devices)).fired
    windows, devices = _idle_gpu(seconds=4.0)
    assert idle(reduce_windows(windows, devices)).fired


def test_a_stalled_job_has_its_own_tag_and_timeline_label():
    from rich.style import Style

    from gputop.ui.panes.verdict import verdict_lines

    note = "no progress for 7 s: pid 100 blocked at train.py:33 in record_loss (hung after 10 s)"
    v = Verdict(None, (), (), None, note)
    assert v.stalled and not v.warming_up and v.label == "stalled"
    (line,) = verdict_lines(v, 1.0, lambda _: Style(), 120)
    assert line.plain == (
        " verdict  STALLED  for 7 s: pid 100 blocked at train.py:33 in record_loss"
        " (hung after 10 s)"
    )


def test_an_eval_pass_in_progress_is_side_work_before_its_step_ends():
    """30-ms steps, then a 10-s eval pass: no finished step shows it until it ends, but the
    stacks do while the step in progress is overdue."""
    eval_pass = (Frame("Module._call_impl", "torch/nn/modules/module.py", 1),
                Frame("evaluate", "train.py", 30), USER)  # fmt: skip
    frames = [FORWARD, BACKWARD] * 3 + [eval_pass] * 4
    for since, fires in ((0.02, False), (4.0, True)):
        steps = agents({"forward": 10, "backward": 20}, since_step_s=since)
        sig = reduce_windows(*IDLE_GPU, agents=steps, host=tree(proc(100, "main", 1.0)),
                             stacks=dumps(frames))  # fmt: skip
        assert side_work(sig).fired is fires


def test_a_straggler_holds_in_its_band():
    """Rank 1 works 8% of the step longer: not a straggler when first seen (10%), but one that
    is shown stays while its excess is over 7% (data skew varies batch to batch)."""
    sig = reduce_windows(*IDLE_GPU, agents=agents({"forward": 50, "backward": 40}, ranks=3,
                                                  slow={1: 8.0}))  # fmt: skip
    assert not straggler(sig).fired
    held = straggler(dataclasses.replace(sig, holding="straggler"))
    assert held.fired and "(>= 7% of the 98 ms step)" in held.evidence[0].text
