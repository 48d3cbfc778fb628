"""When an armed capture is due (``gputop/arm/triggers.py``): each trigger on its rising edge,
re-armed when its condition ends, nothing but a hang in a job's first minute, a new principal
only once it has held, and the rate limits that keep a flapping job to a few captures."""

from __future__ import annotations

from itertools import pairwise

import pytest
from builders import States, rank_work

from gputop.arm.limits import RateLimit
from gputop.arm.triggers import HOLD_S, WARMUP_S, TriggerWatch
from gputop.vocab.arm import TRIGGERS, parse_triggers
from gputop.vocab.bounds import COMMS, DATA_INPUT, HUNG, STRAGGLER

ALL = frozenset(TRIGGERS)


def test_a_hang_fires_once_even_in_warm_up_and_again_after_it_ended():
    s, w = States(), TriggerWatch(ALL)
    assert [f.trigger for f in w.check(s.at(1, HUNG), age_s=5)] == ["hung"]
    assert w.check(s.at(2, HUNG), age_s=6) == []  # still the same hang
    assert w.check(s.at(3, COMMS), age_s=7) == []
    again = w.check(s.at(4, HUNG), age_s=8)
    assert [f.trigger for f in again] == ["hung"] and "summary" in again[0].why


def test_one_state_is_read_once():
    s, w = States(), TriggerWatch(ALL)
    state = s.at(1, HUNG)
    assert len(w.check(state, None)) == 1
    w._held.clear()  # even re-armed, the same evaluation is not looked at twice
    assert w.check(state, None) == []


def test_nothing_but_a_hang_fires_in_the_first_minute_and_what_holds_fires_after_it():
    s, w = States(), TriggerWatch(ALL)
    work = rank_work(2, {1: 100.0, 2: 180.0, 3: 101.0})
    s.shift(1, 0.1, 0.2)  # in warm-up: the warm-up's
    early = s.at(10, STRAGGLER, since=0, inputs=work, risks=("memory: 92% of the limit",))
    assert w.check(early, age_s=WARMUP_S - 1) == []
    s.shift(1, 0.2, 0.3)  # after warm-up
    late = w.check(s.at(70, STRAGGLER, since=0, inputs=work, risks=("memory",)), age_s=WARMUP_S)
    assert sorted(f.trigger for f in late) == ["memory", "regression", "straggler"]
    straggler = next(f for f in late if f.trigger == "straggler")
    assert (straggler.pid, straggler.typical) == (2, 3)  # 101 ms is nearest the median's 101


def test_a_straggler_fires_when_the_verdict_names_it_and_again_for_another_rank():
    s, w = States(), TriggerWatch(ALL)
    work = rank_work(2, {1: 100.0, 2: 180.0})
    assert w.check(s.at(1, DATA_INPUT, inputs=work), None) == []  # the model alone: not named
    fired = w.check(s.at(2, DATA_INPUT, secondary=(STRAGGLER,), inputs=work), None)
    assert [(f.trigger, f.pid) for f in fired] == [("straggler", 2)]
    assert w.check(s.at(3, STRAGGLER, inputs=work), None) == []
    other = rank_work(1, {1: 190.0, 2: 100.0})
    assert [(f.trigger, f.pid) for f in w.check(s.at(4, STRAGGLER, inputs=other), None)] == [
        ("straggler", 1)
    ]


def test_a_regression_is_a_shift_slower_never_faster():
    s, w = States(), TriggerWatch(frozenset({"regression"}))
    s.shift(7, 0.200, 0.150)
    assert w.check(s.at(1, COMMS), None) == []
    s.shift(7, 0.150, 0.300)
    fired = w.check(s.at(2, COMMS), None)
    assert [(f.trigger, f.pid) for f in fired] == [("regression", 7)]
    assert "150 -> 300 ms (+100%)" in fired[0].why


def test_a_new_principal_fires_once_it_held_and_the_first_is_where_the_job_starts():
    s, w = States(), TriggerWatch(frozenset({"verdict"}))
    assert w.check(s.at(HOLD_S, COMMS, since=0), None) == []  # the first principal
    assert w.check(s.at(HOLD_S + 1, DATA_INPUT, since=HOLD_S + 1), None) == []  # not held yet
    fired = w.check(s.at(2 * HOLD_S + 1, DATA_INPUT, since=HOLD_S + 1), None)
    assert [f.trigger for f in fired] == ["verdict"] and fired[0].why.startswith("comms -> ")
    assert w.check(s.at(2 * HOLD_S + 5, DATA_INPUT, since=HOLD_S + 1), None) == []


def test_only_what_is_armed_fires():
    s, w = States(), TriggerWatch(frozenset({"memory"}))
    assert w.check(s.at(1, HUNG), None) == []
    assert [f.trigger for f in w.check(s.at(2, HUNG, risks=("memory",)), None)] == ["memory"]


def test_trigger_lists_parse_and_a_wrong_name_says_the_right_ones():
    assert parse_triggers("all") == ALL and parse_triggers("") == ALL
    assert parse_triggers("hung, straggler") == {"hung", "straggler"}
    with pytest.raises(ValueError, match="hang: not a trigger; choose from hung, straggler"):
        parse_triggers("hang")


def test_a_flapping_job_gets_at_most_the_rate_limit():
    """Ten minutes of a bound that changes every few seconds: one capture per trigger in ten
    minutes, and MOST an hour in all."""
    s, w, limit = States(), TriggerWatch(ALL, hold_s=0), RateLimit()
    allowed, t = [], 0.0
    bounds = (COMMS, DATA_INPUT, HUNG)
    for i in range(200):  # 10 minutes, a new bound every 3 s
        t += 3.0
        for f in w.check(s.at(t, bounds[i % 3], since=t), age_s=120 + t):
            if limit.allow(f.trigger, f.t) is None:
                allowed.append((f.trigger, f.t))
    assert len(allowed) <= 2 * len({a for a, _ in allowed})  # at the 600-s mark, once more
    assert sorted({a for a, _ in allowed}) == ["hung", "verdict"]
    for trigger in ("hung", "verdict"):
        times = [t for a, t in allowed if a == trigger]
        assert all(b - a >= 600 for a, b in pairwise(times))


def test_the_total_limit_holds_whatever_fires():
    limit = RateLimit(per_trigger_s=0, most=6, window_s=3600)
    got = [limit.allow(tr, float(i)) for i, tr in enumerate(["hung", "memory"] * 10)]
    assert sum(g is None for g in got) == 6
    assert "6 armed captures in the last 60 min" in next(g for g in got if g)
    assert limit.allow("hung", 3600 + 1) is None  # the window slid past the first
