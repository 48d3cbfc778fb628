"""Nothing from the socket is trusted: the decoder is total over arbitrary input."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from tests_support import fuzz_examples

from gputop.agent.wire import MAX_LINE, encode
from gputop.sources import agent_decode as dec

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=80),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=20), children, max_size=6)
    ),
    max_leaves=40,
)


@given(st.binary(max_size=2000))
@settings(max_examples=fuzz_examples(300))
def test_arbitrary_bytes_are_decoded_or_dropped(data):
    try:
        msg = dec.decode_line(data)
    except dec.Dropped:
        return
    assert msg["v"] == 1 and isinstance(msg["type"], str)


@given(st.sampled_from(["steps", "gpu", "heartbeat", "hello", "fingerprint"]), json_values)
@settings(max_examples=fuzz_examples(400))
def test_arbitrary_fields_never_raise(kind, payload):
    msg = {"v": 1, "type": kind, "steps": payload, "phases": payload, "agent": payload,
           "config": payload, "step": payload, "open_phase": payload}  # fmt: skip
    steps, dropped = dec.parse_steps(msg)
    assert dropped >= 0 and all(s.dur_ns >= 0 for s in steps)
    dec.parse_gpu(msg)
    dec.parse_heartbeat(msg)
    dec.parse_hello(msg)
    fp = dec.parse_fingerprint(msg)
    assert fp is None or len(fp) <= 64


def test_what_the_agent_sends_is_what_the_monitor_reads():
    line = encode("steps", steps=[{"seq": 0, "step": 5, "t0_ns": 10, "dur_ns": 100,
                                   "phases": {"data_wait": 60, "forward": 30}, "samples": 8,
                                   "tokens": None, "flops": 2.5e9}])  # fmt: skip
    steps, dropped = dec.parse_steps(dec.decode_line(line.rstrip(b"\n")))
    assert dropped == 0
    (s,) = steps
    assert (s.step, s.dur_ns, dict(s.phases), s.samples, s.flops) == (
        5, 100, {"data_wait": 60, "forward": 30}, 8, 2.5e9)  # fmt: skip
    assert s.unaccounted_ns == 10


def test_bad_items_are_counted_and_skipped():
    msg = {"v": 1, "type": "steps", "steps": [
        {"step": 1, "t0_ns": 0, "dur_ns": 5, "phases": {}},
        {"step": -1, "t0_ns": 0, "dur_ns": 5},          # negative step
        {"step": 2, "t0_ns": 0, "dur_ns": True},        # a bool is not a number
        {"step": 3, "t0_ns": 0, "dur_ns": 5, "phases": {"x" * 100: 1}},  # name too long
        "nope",
    ]}  # fmt: skip
    steps, dropped = dec.parse_steps(msg)
    assert [s.step for s in steps] == [1] and dropped == 4


def test_other_versions_and_oversized_lines_are_dropped():
    for line in (json.dumps({"v": 2, "type": "steps"}).encode(), b"[1,2]", b"\xff\xfe",
                 b"{" * 100_000, b" " * (MAX_LINE + 1)):  # fmt: skip
        try:
            dec.decode_line(line)
        except dec.Dropped:
            continue
        raise AssertionError(line[:40])


def test_the_rank_from_the_process_group_is_read_from_the_hello():
    from gputop.agent.ranks import current
    from gputop.agent.server import identity

    info = current({"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "OMPI_COMM_WORLD_RANK": "5"})
    assert (info["source"], info["rank"], info["world_size"]) == ("slurm", 3, 8)
    info |= {"source": "torch.distributed", "dist": {"rank": 1, "world_size": 2,
                                                    "backend": "gloo"}}  # fmt: skip
    hello = dec.parse_hello(json.loads(encode("hello", agent=identity(info))))
    assert (hello["rank"], hello["world_size"]) == (1, 2)  # the group wins over the launcher
    assert hello["ranks"]["source"] == "torch.distributed"
    assert hello["ranks"]["dist"] == {"rank": 1, "world_size": 2, "backend": "gloo"}
    assert hello["ranks"]["launcher"]["OMPI_COMM_WORLD_RANK"] == 5


@given(json_values)
@settings(max_examples=fuzz_examples(200))
def test_a_bad_ranks_field_reads_as_unknown_never_raises(value):
    out = dec.parse_hello({"v": 1, "type": "hello", "agent": {"pid": 7, "rank": 2, "ranks": value}})
    assert out is not None and 0 <= out["rank"] < 1 << 20
    r = out["ranks"]
    assert r is None or set(r["launcher"]) <= {"RANK", "LOCAL_RANK", "WORLD_SIZE",
        "LOCAL_WORLD_SIZE", "GROUP_RANK", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"}  # fmt: skip


def test_ranks_of_another_version_or_out_of_range_are_ignored():
    agent = {"pid": 7, "rank": None}
    for ranks in ({"v": 2, "dist": {"rank": 1, "world_size": 2}},
                  {"v": 1, "dist": {"rank": 2, "world_size": 2}},
                  {"v": 1, "dist": {"rank": True, "world_size": 2}},
                  {"v": 1, "dist": {"rank": 0, "world_size": 1 << 40}}):  # fmt: skip
        out = dec.parse_hello({"agent": {**agent, "ranks": ranks}})
        assert out is not None and out["rank"] is None


thread_items = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "tid": json_values,
            "name": json_values,
            "active": json_values,
            "frames": st.lists(st.lists(json_values, max_size=4) | json_values, max_size=8),
        },
    )
    | json_values,
    max_size=6,
)


@given(thread_items)
@settings(max_examples=fuzz_examples(400))
def test_arbitrary_stacks_never_raise_and_stay_bounded(threads):
    from gputop.sources.stack_phases import thread_stack

    got = dec.parse_stacks({"v": 1, "type": "stacks", "threads": threads})
    assert got is not None
    for tid, name, active, frames in got:
        assert isinstance(tid, int) and isinstance(name, str) and isinstance(active, bool)
        assert all(isinstance(n, str) and isinstance(f, str) for n, f, _ in frames)
        thread_stack(tid, name, active, frames)  # classified like any other stack


def test_a_huge_stacks_message_is_cut_not_trusted():
    from gputop.vocab.stacks import STACK_DEPTH

    frame = ["f" * 5000, "x.py", 1]
    msg = {"v": 1, "type": "stacks",
           "threads": [{"tid": i, "name": "t", "active": True, "frames": [frame] * 1000}
                       for i in range(2000)]}  # fmt: skip
    got = dec.parse_stacks(msg)
    assert got is not None and len(got) == dec.MAX_THREADS
    assert all(len(frames) == STACK_DEPTH for *_, frames in got)
    assert len(got[0][3][0][0]) == dec.MAX_FRAME_TEXT
    assert dec.parse_stacks({"v": 1, "type": "stacks", "threads": "no"}) is None
