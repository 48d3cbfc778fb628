"""host-overhead from the loop's own Python: a typical step that spends a large share outside
every training phase (per-step metrics, logging, .item() syncs), by the agent's clock or, without
it, by the main threads' stacks once they train. Setup before the first step and garbage
collection are not the loop's overhead."""

from __future__ import annotations

from builders import agent, host_at, step
from builders import proc as a_proc

from gputop.diagnose.bounds import judge
from gputop.diagnose.rules import host_overhead
from gputop.diagnose.signals.host import host_signals
from gputop.diagnose.signals.inputs import RuleInputs
from gputop.diagnose.signals.stacks import stack_signals
from gputop.diagnose.signals.steps import step_signals
from gputop.model import Window
from gputop.model.stack_stats import own_code
from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
from gputop.model.step_stats import loop_share
from gputop.model.steps import AgentsSample
from gputop.sources.stack_phases import classify

BACKWARD = (Frame("_engine_run_backward", "torch/autograd/graph.py", 820),
            Frame("main", "train.py", 52))  # fmt: skip
METRICS = (Frame("dumps", "json/__init__.py", 231), Frame("log_metrics", "train.py", 18),
           Frame("main", "train.py", 55))  # fmt: skip
SETUP = (Frame("build_vocab", "train.py", 30), Frame("main", "train.py", 45))


def window(frames: list[tuple[Frame, ...]]) -> Window:
    """One active main-thread dump a second, in order."""
    samples = []
    for i, f in enumerate(frames):
        t = ThreadStack(100, "MainThread", True, f, *classify(f, True))
        samples.append(StacksSample(100, float(i), 0.0, (ProcessStacks(100, "main", (t,)),)))
    return Window(tuple(samples), 0.0, float(len(frames)))


def busy_host(cores: float = 1.0) -> Window:
    main = a_proc(100, "main", cmdline="", cpu_cores=cores)
    samples = tuple(host_at(t, (main,), 2.0, effective_cpus_source="affinity") for t in range(5))
    return Window(samples, 0.0, 5.0)


def agents(phases_ms: dict[str, float], dur_ms: float, gc_ms: float = 0.0) -> AgentsSample:
    steps = tuple(
        step(i, i * int(dur_ms * 1e6), phases_ms, dur_ms=dur_ms, gc_ns=int(gc_ms * 1e6))
        for i in range(30)
    )
    return AgentsSample(target=100, t=1.0, wall=0.0, agents=(agent(100, steps),))


def test_own_code_counts_from_the_first_training_sample():
    """Ten dumps of setup, then a loop that logs in half its dumps: 50%, not 75%."""
    frames = [SETUP] * 10 + [BACKWARD, METRICS] * 5
    own = own_code(window(frames).samples)
    assert own is not None and own.samples == 10 and own.share == 0.5
    assert own.at == ((Frame("log_metrics", "train.py", 18), 0.5),)
    assert own_code(window([SETUP] * 10).samples) is None  # never trained: setup, not the loop


def test_logging_in_half_of_each_step_without_the_agent_is_host_overhead():
    frames = [BACKWARD, METRICS] * 5
    f = host_overhead(RuleInputs(None, host_signals(busy_host()), None,
                                 stack_signals(window(frames))))  # fmt: skip
    assert f.fired
    assert f.summary == "the loop's own Python outside the training phases holds up every step"
    assert f.evidence[0].text == (
        "main thread in its own code, outside every training phase, 50% of 10 stack samples "
        "since it began to train, using CPU (> 30%): log_metrics at train.py:18 50%"
    )
    # the same stacks from a thread that does not compute (sleeping between steps) are no cost
    quiet = host_overhead(RuleInputs(None, host_signals(busy_host(0.1)), None,
                                     stack_signals(window(frames))))  # fmt: skip
    assert not quiet.fired


def test_the_agents_clock_decides_the_loops_share():
    slow = agents({"forward": 10, "backward": 10, "optimizer": 5}, dur_ms=55)
    f = host_overhead(RuleInputs(None, None, step_signals(slow), None))
    assert f.fired and f.impact > 0.5
    assert "the typical step spends 55% outside its data, forward, backward and optimizer" in (
        f.evidence[0].text
    )
    # stacks that show logging do not outvote an agent that times it small
    lean = agents({"forward": 10, "backward": 10, "optimizer": 5}, dur_ms=26)
    frames = [BACKWARD, METRICS] * 5
    f = host_overhead(RuleInputs(None, host_signals(busy_host()), step_signals(lean),
                                 stack_signals(window(frames))))  # fmt: skip
    assert not f.fired


def test_garbage_collection_and_periodic_spikes_are_not_the_loops_overhead():
    phases = {"forward": 10, "backward": 10, "optimizer": 5}
    with_gc = agents(phases, dur_ms=55, gc_ms=28)  # the step's extra time is GC: side work
    assert not host_overhead(RuleInputs(None, None, step_signals(with_gc), None)).fired
    steady = [step(i, i, phases, dur_ms=26) for i in range(20)]
    spikes = [step(20 + i, i, phases, dur_ms=500) for i in range(5)]  # an eval every few steps
    assert loop_share(steady + spikes) < 0.05


def test_the_first_lever_names_the_functions_to_move_off_the_step():
    frames = [BACKWARD, METRICS] * 5
    sig = RuleInputs(None, host_signals(busy_host()), None, stack_signals(window(frames)))
    f = judge(host_overhead, sig)
    assert f.levers[0] == (
        "run log_metrics (train.py:18) every N steps, or hand it to a background thread"
    )
