"""A whole run in bounded memory: its mean step and shares match the steps' own, the warm-up is
left out, a day of steps stays a few hundred batches, and the error holds for correlated
steps."""

from __future__ import annotations

import random

import pytest
from builders import agent, step

from gputop.diagnose import RunSteps
from gputop.diagnose.run_steps import BATCHES_MOST, WARMUP_STEPS
from gputop.vocab import budget as b


def steps(n: int, seed: int = 0, rho: float = 0.5) -> list:
    rnd = random.Random(seed)
    out, t, e = [], 0, 0.0
    for i in range(n):
        e = rho * e + rnd.gauss(0, 0.05)
        s = step(i, t, {"forward": 80.0 * (1 + e), "data_wait": 20.0})
        out.append(s)
        t += s.dur_ns
    return out


def feed(run: RunSteps, all_steps: list, every: int = 10, kept: int = 300, pid: int = 7) -> None:
    for end in range(every, len(all_steps) + every, every):
        window = tuple(all_steps[max(0, end - kept) : end])
        a = agent(pid, window)
        run.add(a, (a,))


def test_the_mean_and_shares_are_the_steps_own_after_the_warm_up():
    s = steps(1000)
    run = RunSteps()
    feed(run, s, every=7, kept=50)
    got = run.summary()
    counted = s[WARMUP_STEPS:]
    assert got.steps == len(counted)
    assert got.step.value == pytest.approx(sum(x.dur_ns for x in counted) / len(counted) / 1e9)
    data = sum(x.phases["data_wait"] for x in counted) / sum(x.dur_ns for x in counted)
    assert got.shares[b.DATA][0] == pytest.approx(data)
    assert 0 < got.shares[b.DATA][1] < 0.01
    assert got.step.error > 0


def test_a_long_run_is_kept_in_bounded_batches_with_the_same_mean():
    s = steps(BATCHES_MOST * 16 * 5 + 37, rho=0.0)
    run = RunSteps()
    feed(run, s, every=100, kept=200)
    assert len(run._batches) <= BATCHES_MOST
    counted = s[WARMUP_STEPS:]
    got = run.summary()
    assert got.step.value == pytest.approx(sum(x.dur_ns for x in counted) / len(counted) / 1e9)
    assert got.steps == len(counted)


def test_the_error_holds_for_correlated_steps():
    """Over 200 runs of 600 correlated steps, the true mean is within 2 errors of the run's mean
    at least 93 times in 100 (the error of independent steps would say so far less often)."""
    inside = 0
    for seed in range(200):
        run = RunSteps()
        feed(run, steps(600 + WARMUP_STEPS, seed, rho=0.8), every=50)
        got = run.summary()
        inside += abs(got.step.value - 0.1) <= 2 * got.step.error
    assert inside / 200 >= 0.93


def test_the_main_agent_is_followed_once_steps_were_summed():
    run = RunSteps()
    s = steps(200)
    feed(run, s)
    other = steps(200, seed=3)
    late = agent(8, tuple(other), rank=0)  # rank 0 reports late
    run.add(late, (late, agent(7, tuple(s))))
    assert run.summary().steps == 200 - WARMUP_STEPS
