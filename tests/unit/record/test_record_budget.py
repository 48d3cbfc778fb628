"""A recorded verdict keeps its step-time budget: read back equal to what the live verdict
kept, older files (no budget) still read, and a crafted budget is damage, never a crash."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from builders import MS, agent, device, gpu_sample, step

from gputop.diagnose import evaluate, reduce_windows
from gputop.model import Window
from gputop.model.steps import AgentsSample
from gputop.record.codec import CodecError
from gputop.record.events import RecordedVerdict, decode_budget, encode_budget
from gputop.render.budget import budget_line


def live_verdict():
    ranks = []
    for r in range(2):
        extra = 20 if r == 1 else 0
        steps = tuple(
            step(i, i * 10**8, {"forward": 40 + extra, "backward": 40, "grad_sync": 25 - extra})
            for i in range(20)
        )
        ranks.append(agent(100 + r, steps, rank=r))
    v, _ = evaluate(reduce_windows([], [], agents=AgentsSample(99, 1.0, 0.0, tuple(ranks))), 5.0)
    assert v.budget is not None
    return v


def test_a_budget_reads_back_as_it_was_kept():
    kept = RecordedVerdict.of(live_verdict()).budget
    assert kept is not None
    raw = json.loads(json.dumps(encode_budget(kept)))
    assert decode_budget(raw) == kept
    assert budget_line(kept) == budget_line(live_verdict().budget)


def test_the_slices_the_stacks_decided_read_back_with_their_error():
    live = live_verdict().budget
    typical = replace(live.typical, samples=20, errors={"compute": 0.08})
    ranks = tuple(typical if r is live.typical else r for r in live.ranks)
    kept = RecordedVerdict.of(replace(live_verdict(), budget=replace(live, typical=typical,
                                      ranks=ranks))).budget  # fmt: skip
    back = decode_budget(json.loads(json.dumps(encode_budget(kept))))
    assert back.typical.errors == {"compute": 0.08} and back.typical.samples == 20
    assert back.slice("compute").error == 0.08 and back.slice("straggler").error == 0


def test_each_slices_spread_reads_back_and_says_its_interval():
    # steps whose data wait is long for 32 steps, then short: the clock's spread is kept per
    # rank and read back, so a recording's why screen says the interval the live one did
    steps = tuple(
        step(i, i * 10**8, {"forward": 60, "data_wait": 30 if (i // 32) % 2 else 5})
        for i in range(200)
    )
    sig = reduce_windows([], [], agents=AgentsSample(99, 1.0, 0.0, (agent(100, steps),)))
    v, _ = evaluate(sig, 5.0)
    assert v.budget is not None
    live = v.budget.slice("data")
    assert live.spread > 0.005 and live.interval[0] < live.share < live.interval[1]
    kept = RecordedVerdict.of(v).budget
    back = decode_budget(json.loads(json.dumps(encode_budget(kept))))
    assert back == kept
    assert back.slice("data").spread == pytest.approx(live.spread, abs=1e-4)


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:3],
        lambda raw: [5, *raw[1:]],
        lambda raw: [raw[0], [], *raw[2:]],
        lambda raw: [0, [[*raw[1][0][:6], [math.nan] * 11]], *raw[2:]],
        lambda raw: [0, [[*raw[1][0][:6], [0.5] * 10]], *raw[2:]],
        lambda raw: [0, [[*raw[1][0][:2], "ptrace", *raw[1][0][3:]]], *raw[2:]],
        lambda raw: [*raw[:2], {"gdb": [0.1] * 11}, raw[3]],
        lambda raw: [*raw[:2], {"agent": [2.0] * 11}, raw[3]],
        lambda raw: [*raw[:3], [["nowhere", ["NVML"]]]],
        lambda raw: [0, [[None, 1, "agent", 1e300 * 1e10, 1, 0, [0.1] * 11]], *raw[2:]],
        lambda raw: [0, [[*raw[1][0][:7], {"nowhere": 0.1}]], *raw[2:]],
        lambda raw: [0, [[*raw[1][0][:7], {"loop": math.nan}]], *raw[2:]],
        lambda raw: [0, [[*raw[1][0][:7], {"loop": -1}]], *raw[2:]],
        lambda raw: [0, [[*raw[1][0][:7], ["loop"]]], *raw[2:]],
        lambda raw: [0, [[*raw[1][0][:7], {}, {"loop": 2.0}]], *raw[2:]],
        lambda raw: [0, [[*raw[1][0][:7], {}, ["loop"]]], *raw[2:]],
        lambda raw: [0, [[*raw[1][0][:7], {}, {}, {}]], *raw[2:]],
    ],
)
def test_a_crafted_budget_is_damage(damage):
    raw = json.loads(json.dumps(encode_budget(RecordedVerdict.of(live_verdict()).budget)))
    with pytest.raises(CodecError):
        decode_budget(damage(raw))


def test_a_budget_from_readings_no_clock_gives_still_records_and_reads_back():
    # a crafted or damaged reading beside sound steps: a step in progress for 1e308 s (past
    # OVERDUE_MAX_S: no clock gives it) and a GPU busy -1e308 %. Neither may reach the budget
    # (an infinite total once left no budget at all, a NaN share stopped replay): the budget
    # is the finished steps' own, 100 ms forward and 20 ms data wait of every 120 ms, and what
    # is kept reads back
    steps = tuple(step(i, i * 120 * MS, {"forward": 100.0, "data_wait": 20.0}) for i in range(8))
    far = agent(100, steps, since_step_s=1e308, open_phase="eval")
    busy = Window(tuple(gpu_sample(0, float(t), util_gpu_pct=-1e308) for t in range(5)), 0.0, 5.0)
    sig = reduce_windows([busy], [device(0)], agents=AgentsSample(99, 1.0, 0.0, (far,)))
    v, _ = evaluate(sig, 5.0)
    assert v.budget is not None, "no budget from sound steps beside a damaged reading"
    shares = {x.name: x.share for x in v.budget.slices}
    assert shares == pytest.approx({**dict.fromkeys(shares, 0.0), "compute": 100 / 120,
                                    "data": 20 / 120})  # fmt: skip
    from_gpu = [x.name for x in v.budget.slices if any(src == "NVML" for src, _ in x.estimates)]
    assert not from_gpu, f"a GPU busy -1e308 % measured the slices {from_gpu}"
    kept = RecordedVerdict.of(v).budget
    assert kept is not None
    assert decode_budget(json.loads(json.dumps(encode_budget(kept)))) == kept
