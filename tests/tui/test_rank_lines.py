"""Ranks shown as ranks in the host and stacks panes (pure line functions)."""

from __future__ import annotations

import dataclasses

from conftest import host_sample, stacks_window
from rich.style import Style

from gputop.model.stacks import ProcessStacks, StacksSample
from gputop.ui.panes.host import host_lines
from gputop.ui.panes.stacks import stack_lines


def style(level: str) -> Style:
    return Style()


def test_the_host_pane_counts_ranks_with_their_numbers_apart_from_workers():
    h = host_sample()
    plain = "\n".join(t.plain for t in host_lines(h, style, 160))
    assert "ranks" not in plain  # a job without ranks reads as before
    main, *workers = h.processes
    ranks = tuple(
        dataclasses.replace(main, pid=6000 + i, role="rank", rank=r, cpu_cores=c)
        for i, (r, c) in enumerate(((0, 0.98), (1, 0.91), (None, 0.5)))
    )
    h = dataclasses.replace(h, processes=(main, *ranks, *workers))
    plain = "\n".join(t.plain for t in host_lines(h, style, 160))
    assert "ranks 3: 0 98% 1 91% ? 50%" in plain
    assert "workers 4: 97% 95% 99% 93% (4 pegged)" in plain
    # attached to one rank of a job: the target says which
    h = dataclasses.replace(h, processes=(dataclasses.replace(main, rank=3), *workers))
    assert "main (rank 3) 0.12 cores" in host_lines(h, style, 160)[1].plain


def test_the_stacks_pane_names_a_ranks_main_thread_for_its_rank():
    window = stacks_window()
    plain = "\n".join(t.plain for t in stack_lines(window, style, 160))
    assert "4242 MainThread" in plain and "rank" not in plain

    def with_ranks(s: StacksSample) -> StacksSample:
        main = s.processes[0]
        ranks = [ProcessStacks(6000 + r, "rank", main.threads, None, 0.02, rank=r) for r in (0, 1)]
        return dataclasses.replace(s, processes=(*s.processes, *ranks))

    plain = "\n".join(t.plain for t in stack_lines([with_ranks(s) for s in window], style, 160))
    assert "4242 MainThread" in plain
    assert "6000 rank 0       data wait" in plain and "6001 rank 1 " in plain
    assert "1 DataLoader workers sampled" in plain


def test_the_stacks_pane_says_who_read_each_process_and_how_long_ago():
    window = stacks_window()

    def read(s: StacksSample) -> StacksSample:
        main, worker, *rest = s.processes
        return dataclasses.replace(s, processes=(
            dataclasses.replace(main, via="agent", taken=s.t - 0.4),
            dataclasses.replace(worker, via="py-spy", taken=s.t - 7.0), *rest))  # fmt: skip

    plain = "\n".join(t.plain for t in stack_lines([read(s) for s in window], style, 160))
    assert "(agent, 0 s ago)" in plain, plain
    assert "read by py-spy in turn, the oldest 7 s ago" in plain, plain
    # recordings made before reads were dated say nothing of it
    plain = "\n".join(t.plain for t in stack_lines(window, style, 160))
    assert "ago" not in plain
