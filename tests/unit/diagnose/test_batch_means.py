"""Before and after with an interval that holds for correlated steps: an unchanged job is said
unchanged about 19 times in 20, a 2% slowdown is told within 300 steps, and the text says when
the interval cannot tell yet."""

from __future__ import annotations

import random

import pytest

from gputop.diagnose.batch_means import Mean, change_between, change_text, mean_of


def change_of(before: list[float], after: list[float]):
    return change_between(mean_of(before), mean_of(after))


def run(n: int, rnd: random.Random, level: float = 0.1, cv: float = 0.03, rho: float = 0.5):
    """``n`` step times around ``level``, correlated step to step by ``rho`` (an AR(1) run)."""
    out, e = [], rnd.gauss(0.0, cv)
    for _ in range(n):
        e = rho * e + rnd.gauss(0.0, cv) * (1 - rho**2) ** 0.5
        out.append(level * (1 + e))
    return out


def iid_error(values: list[float]) -> float:
    m = sum(values) / len(values)
    return (sum((v - m) ** 2 for v in values) / (len(values) - 1) / len(values)) ** 0.5


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8])
def test_an_unchanged_job_is_said_unchanged_19_times_in_20(rho):
    rnd = random.Random(17)
    said = [change_of(run(300, rnd, rho=rho), run(300, rnd, rho=rho)) for _ in range(400)]
    unchanged = sum(not c.distinguishable for c in said) / len(said)
    assert unchanged >= 0.93
    if rho >= 0.5:  # the spread of single steps would say changed far more often
        naive = 0
        for _ in range(200):
            a, b = run(300, rnd, rho=rho), run(300, rnd, rho=rho)
            c = change_between(
                Mean(sum(a) / 300, iid_error(a), 300), Mean(sum(b) / 300, iid_error(b), 300)
            )
            naive += not c.distinguishable
        assert naive / 200 < 0.9


@pytest.mark.parametrize("rho", [0.0, 0.5])
def test_a_2_percent_slowdown_is_told_within_300_steps_9_times_in_10(rho):
    rnd = random.Random(5)
    told = 0
    for _ in range(200):
        c = change_of(run(300, rnd, rho=rho), run(300, rnd, level=0.102, rho=rho))
        told += c.distinguishable and c.rel > 0
    assert told / 200 >= 0.9


def test_the_interval_holds_the_change_it_measures():
    rnd = random.Random(9)
    c = change_of(run(400, rnd), run(400, rnd, level=0.082))
    assert c.distinguishable
    assert c.low < -0.18 < c.high
    assert change_text(c).startswith("-18") and "±" in change_text(c)


def test_too_few_steps_say_so_and_noise_says_not_yet():
    rnd = random.Random(3)
    assert change_text(change_of(run(10, rnd), run(10, rnd))).endswith("(too few steps yet)")
    noisy = change_of(run(64, rnd, cv=0.2), run(64, rnd, level=0.101, cv=0.2))
    assert not noisy.distinguishable
    assert change_text(noisy).endswith("not yet distinguishable")


def test_a_mean_of_nothing_or_of_a_zero_level_is_no_change():
    assert mean_of([]) == Mean(0.0, 0.0, 0)
    c = change_between(Mean(0.0, 0.0, 100), Mean(0.1, 0.01, 100))
    assert not c.distinguishable
    assert change_text(c).startswith("0.0% ±?")
