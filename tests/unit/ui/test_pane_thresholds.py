"""The panes colour a number where the verdict's rule judges it: each level function changes
level exactly at the rule's (or signal's) threshold, read here from ``diagnose/thresholds.py``,
where the rules read it too. A pane that kept its own copy of a threshold fails here as soon as
the rule's is tuned (the agreement the verdict pane's reader relies on: a red number under a
verdict that ignores it, or a calm number the verdict calls the cause, is a contradiction on one
screen).

A second check reads the level functions' source: no number compared in them but a named one
(0 aside), so a threshold cannot come back as a literal.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from dataclasses import replace

import pytest
from builders import MS, agent, device, gpu_sample
from builders import step as step_record
from rich.style import Style

from gputop.diagnose import thresholds
from gputop.ui import gpu_text
from gputop.ui.panes import host as host_text
from gputop.ui.panes import stacks as stacks_text
from gputop.ui.panes import steps as steps_text
from gputop.vocab import steps as step

EPS = 1e-6


def changes_at(level: Callable[[float], str], threshold: float) -> tuple[str, str]:
    """The levels just under and just over ``threshold``; they must differ."""
    below, above = level(threshold - EPS), level(threshold + EPS)
    assert below != above, f"the level does not change at {threshold}: {below!r} on both sides"
    return below, above


CPUS = 4.0
CASES: dict[str, tuple[Callable[[float], str], float, str]] = {
    # name: (the pane's level as a function of the number, the rule's threshold, level above)
    "runnable threads: the oversubscription rule": (
        lambda x: host_text.threads_level(12, 12 / x),  # 12 runnable threads, x per CPU
        thresholds.RUNNABLE_PER_CPU,
        "bad",
    ),
    "run-queue wait: the oversubscription rule": (
        lambda x: host_text.runq_level(x * CPUS, CPUS),
        thresholds.RUNQ_PER_CPU,
        "warn",
    ),
    "cgroup CPU throttling: the oversubscription rule": (
        host_text.throttle_level,
        thresholds.CPU_THROTTLED,
        "bad",
    ),
    "working set against its limit: the memory-pressure signal": (
        lambda x: host_text.memory_level(int(x * 2**40), 2**40, 0),
        thresholds.MEM_NEAR,
        "bad",
    ),
    "memory PSI: the memory-pressure rule": (
        lambda x: host_text.psi_level(x, dict((r, f) for r, _, f in host_text.PSI_SHOWN)["memory"]),
        thresholds.MEM_PRESSURE,
        "warn",
    ),
    "io PSI: the data-input/io rule": (
        lambda x: host_text.psi_level(x, dict((r, f) for r, _, f in host_text.PSI_SHOWN)["io"]),
        thresholds.IO_PRESSURE,
        "warn",
    ),
    "batch wait: the data-input rule": (
        lambda x: steps_text.phase_level(step.DATA_WAIT, x),
        thresholds.DATA_WAIT_WARN,
        "warn",
    ),
    "batch wait: the budget's floor for a principal": (
        lambda x: steps_text.phase_level(step.DATA_WAIT, x),
        thresholds.FLOOR,
        "bad",
    ),
    "gradient sync: the comms rule": (
        lambda x: steps_text.phase_level(step.GRAD_SYNC, x),
        thresholds.COMMS_SHARE,
        "bad",
    ),
    "evaluation: the side-work rule": (
        lambda x: steps_text.phase_level(step.EVAL, x),
        thresholds.SIDE_SHARE,
        "warn",
    ),
    "checkpoint: the side-work rule": (
        lambda x: steps_text.phase_level(step.CHECKPOINT, x),
        thresholds.SIDE_SHARE,
        "warn",
    ),
    "SM clock: the gpu-compute rule's full speed": (
        lambda x: gpu_text.clock_level(gpu_sample(0, 0.0, sm_clock_mhz=x * 1980), device(0)),
        thresholds.COMPUTE_CLOCK,
        "good",
    ),
    "temperature: the thermal rule's margin under slowdown": (
        lambda x: gpu_text.temp_level(
            gpu_sample(0, 0.0, temp_c=device(0).temp_slowdown_c - x), device(0)
        ),
        thresholds.SLOWDOWN_MARGIN_C,
        "warn",  # further under the slowdown temperature than the margin: only warm
    ),
    "power limit: the signal's lowered limit": (
        lambda x: gpu_text.power_level(gpu_sample(0, 0.0, power_limit_w=x * 700.0), device(0)),
        thresholds.LOWERED_LIMIT,
        "value",
    ),
    "SMs busy under the utilisation: the host-overhead rule's tiny kernels": (
        lambda x: gpu_text.sm_active_level(
            gpu_sample(0, 0.0, util_gpu_pct=90, sm_active_pct=90 * x)
        ),
        thresholds.TINY_KERNELS,
        "value",
    ),
    "GPU busy at all: the idle rule's utilisation": (
        lambda x: "busy" if gpu_text.busy(gpu_sample(0, 0.0, util_gpu_pct=x)) else "idle",
        thresholds.IDLE_UTIL,
        "busy",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_pane_changes_level_at_the_rules_threshold(name):
    level, threshold, above = CASES[name]
    assert changes_at(level, threshold)[1] == above, name


def test_the_busy_utilisation_for_tiny_kernels_is_the_rules():
    reading = gpu_sample(0, 0.0, sm_active_pct=10.0)
    lower, higher = (
        gpu_text.sm_active_level(replace(reading, util_gpu_pct=u))
        for u in (thresholds.LAUNCH_UTIL - 1, thresholds.LAUNCH_UTIL)
    )
    assert (lower, higher) == ("value", "warn")


def test_an_open_phase_turns_bad_where_the_hang_rule_stops_waiting():
    steps = tuple(step_record(n, n * 100 * MS, {step.FORWARD: 100.0}) for n in range(1, 30))
    limit = thresholds.step_limit_s(100.0)  # every step 100 ms: its p99 too
    for age, want in ((limit - 0.1, "value"), (limit + 0.1, "bad")):
        a = agent(1, steps, open_phase=step.FORWARD, open_age_s=age)
        now = steps_text.step_lines(a, _styles, 120)[-1]
        spans = [s for s in now.spans if now.plain[s.start : s.end].startswith("forward for")]
        assert spans and spans[0].style.link == want, (age, now.plain, now.spans)


def test_the_stacks_pane_stands_still_where_the_verdict_says_so():
    assert stacks_text.STILL_S == thresholds.STALL_NOTE_S
    assert stacks_text.STILL_IDLE == thresholds.IDLE_DUMPS


def _styles(level: str) -> Style:
    return Style(link=level)  # the level carried in the style, for the test to read back


LEVEL_FUNCTIONS = [
    f
    for module in (gpu_text, host_text, steps_text)
    for name, f in vars(module).items()
    if inspect.isfunction(f) and f.__module__ == module.__name__ and name.endswith("_level")
]


@pytest.mark.parametrize("f", LEVEL_FUNCTIONS, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_a_level_function_compares_with_named_thresholds_only(f):
    tree = ast.parse(inspect.getsource(f))
    literals = [
        (node.lineno, ast.unparse(node))
        for cmp in ast.walk(tree)
        if isinstance(cmp, ast.Compare)
        for side in (cmp.left, *cmp.comparators)
        for node in ast.walk(side)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
        and node.value != 0
    ]
    assert not literals, (
        f"{f.__name__} compares with numbers of its own {literals}: import the rule's "
        "threshold (gputop/diagnose/rules/, signals.py) or name the pane's own in its module"
    )
