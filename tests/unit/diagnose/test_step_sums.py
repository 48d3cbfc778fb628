"""The budget's window sums kept as the window slides equal the window summed afresh, whatever
the readings did: a few steps on, many, a restart, a window cut by time, a step replaced when
its GPU times resolved."""

from __future__ import annotations

from dataclasses import replace

from builders import agent, step
from hypothesis import given, settings
from hypothesis import strategies as st

from gputop.diagnose import step_sums
from gputop.diagnose.signals.rank_steps import of_agent
from gputop.diagnose.step_sums import _Sliding, sums_of

MS = 1_000_000
PHASES = ("data_wait", "forward", "backward", "checkpoint", "eval", "my_val_loop")


def history(n: int, seed: int) -> list:
    out, t = [], 0
    for i in range(n):
        ph = {p: float((seed * 31 + i * 17 + k * 7) % 23) for k, p in enumerate(PHASES)}
        if i % 9:
            ph.pop("checkpoint")
        s = step(i, t, ph, dur_ms=sum(ph.values()) + (i * 13 + seed) % 11, gc_ns=i * 1000)
        out.append(s)
        t += s.dur_ns
    return out


def fresh(steps):
    sliding = _Sliding()
    sliding.slide(steps)
    return sliding.sums()


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 50),
    st.lists(st.tuples(st.integers(0, 40), st.integers(1, 600), st.booleans()), max_size=12),
)
def test_sliding_sums_equal_fresh_sums(seed, readings):
    steps = history(700, seed)
    step_sums._KEPT.clear()
    start = 0
    for skip, length, restart in readings:
        start = 0 if restart else min(start + skip, 690)
        window = steps[start : start + length]
        if restart:  # a new run: the same step numbers from a new clock
            window = [replace(s, t0_ns=s.t0_ns + 1) for s in window]
        r = of_agent(agent(7, tuple(window)))
        got = sums_of(r, 3)
        kept = r.long
        want = fresh(kept) if len(kept) >= 3 else None
        assert got == want


def test_a_step_replaced_with_its_gpu_times_is_the_same_step():
    steps = history(40, 1)
    step_sums._KEPT.clear()
    before = sums_of(of_agent(agent(8, tuple(steps))), 3)
    resolved = [*steps[:-1], replace(steps[-1], gpu={"forward": 5 * MS})]
    assert sums_of(of_agent(agent(8, tuple(resolved))), 3) == before
