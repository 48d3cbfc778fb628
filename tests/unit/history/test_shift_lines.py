"""Shifts as people read them: ranks that shifted together are one shift of the job, said
once with every rank; the latest says its steps since against before with an interval."""

from __future__ import annotations

from gputop.diagnose import Mean, Shift, change_between
from gputop.render.compare import grouped, shift_docs, shift_line


def shift(pid: int, at: int, before: float, after: float) -> Shift:
    return Shift(pid, at, 0, before, after, Mean(before, 0.0005, 200), {"data": after - before})


def test_ranks_that_shifted_together_are_one_line():
    shifts = [(shift(100, 700, 0.1, 0.13), "0", 1.0), (shift(101, 703, 0.1, 0.13), "1", 1.0),
              (shift(100, 900, 0.13, 0.1), "0", 9.0)]  # fmt: skip
    since = change_between(Mean(0.13, 0.0005, 200), Mean(0.1, 0.0004, 150))
    lines = [shift_line(d) for d in grouped(shift_docs(shifts, since))]
    assert lines == [
        "step time shifted at step 700 (ranks 0, 1): 100 ms -> 130 ms (+30%): data wait "
        "+30 ms/step",
        "step time shifted at step 900 (rank 0): 130 ms -> 100 ms (-23%): data wait -30 ms/step"
        "; since then -23% ±0.9%",
    ]


def test_a_shift_of_another_direction_or_far_apart_is_its_own():
    shifts = [(shift(100, 700, 0.1, 0.13), "0", 1.0), (shift(101, 705, 0.1, 0.08), "1", 1.0),
              (shift(102, 760, 0.1, 0.13), "2", 2.0)]  # fmt: skip
    assert [d["ranks"] for d in grouped(shift_docs(shifts))] == [["0"], ["1"], ["2"]]
