"""The corpus runs kept and compared (tests/corpus/runs.py): a run saved is read back the same,
a line that is not a run is skipped with its place said, the spread across runs is each
slice's range in points, each slice is set against the job's own clocks, and a scenario
whose finals differ between two builds is marked."""

from __future__ import annotations

import json

import pytest
from _clocks import shares
from harness import Result
from runs import compare_table, load, row, save, spread_table, truth_table
from scenarios import by_name


def run(final: str | None, loop: float, n: int, label: str = "a") -> dict:
    s = by_name("mixed_wait10_loop35")
    r = Result(s, "run", final, 3.0, 0, budget={"loop": loop, "data": 0.10, "gc": 0.001})
    return row(r, label, n)


def test_a_saved_run_reads_back_and_a_broken_line_is_skipped(tmp_path, capsys):
    path = tmp_path / "runs.jsonl"
    save(path, [run("host-overhead", 0.35, 1)])
    with path.open("a") as f:
        f.write("{not json\n")
    save(path, [run("host-overhead", 0.37, 2)])
    back = load([path])
    assert [r["run"] for r in back] == [1, 2]
    assert back[0] == run("host-overhead", 0.35, 1)
    assert back[0]["right"] is True
    assert f"{path}:2: not a JSON line, skipped" in capsys.readouterr().out


def test_the_spread_is_each_slices_range_in_points():
    lines = spread_table([run("host-overhead", 0.33, 1), run("host-overhead", 0.41, 2),
                          run("data-input", 0.36, 3)])  # fmt: skip
    (case,) = [ln for ln in lines if ln.startswith("mixed_wait10_loop35")]
    assert "host-overhead x2, data-input" in case
    assert "loop 33-41 (8)" in case and "data 10-10 (0)" in case
    assert "gc" not in case  # under 1% in every run
    assert "one final verdict in every run: 0 of 1" in lines
    assert "every slice within 5 points across runs: 0 of 1" in lines


def test_finals_that_differ_between_builds_are_marked():
    before = [run("host-overhead", 0.35, n, "old") for n in (1, 2)]
    kept = compare_table(before, [run("host-overhead", 0.36, n, "new") for n in (1, 2)])
    moved = compare_table(before, [run("data-input", 0.36, 1, "new")])
    assert "same " in kept[1] and "2/2->2/2" in kept[1]
    assert "MOVED host-overhead x2  ->  data-input" in moved[1] and "2/2->0/1" in moved[1]
    assert "the same finals before and after: 0 of 1" in moved


def timed(loop_clock: float, loop_gputop: float, n: int) -> dict:
    s = by_name("mixed_wait10_loop35")
    truth = {"data": 0.10, "compute": 0.9 - loop_clock, "loop": loop_clock}
    budget = {"data": 0.11, "compute": 0.89 - loop_gputop, "loop": loop_gputop, "comms": 0.0}
    return row(Result(s, "run", "host-overhead", 3.0, 0, budget=budget, truth=truth), "a", n)


def test_each_slice_is_set_against_the_jobs_own_clocks_run_by_run():
    lines = truth_table([timed(0.35, 0.36, 1), timed(0.34, 0.27, 2)])
    (loop,) = [ln for ln in lines if " loop " in ln]
    assert "35/36 34/27  (7)  OVER" in loop
    (data,) = [ln for ln in lines if " data " in ln]
    assert "10/11 10/11  (1)" in data and "OVER" not in data
    assert not [ln for ln in lines if " comms " in ln]  # under half a percent both ways
    assert "every slice within 5 points of the job's clocks in every run: 0 of 1" in lines


def test_the_jobs_clocks_cover_gputops_window_and_the_rest_of_a_step_is_the_loop(tmp_path):
    path = tmp_path / "7.jsonl"
    lines = [{"t": 100.0 + i, "dur": 1.0, "parts": {"data": 0.2, "compute": 0.5, "gc": 0.1}}
             for i in range(10)]  # fmt: skip
    lines[2]["parts"]["data"] = 0.9  # before the window
    path.write_text("\n".join(json.dumps(x) for x in lines) + '\n{"t": 1')  # cut by the kill
    got = shares(str(path), end=108.5, steps=5, open_after=1.0)  # steps ending at 104..108
    assert got == pytest.approx(
        {
            "data": 0.2,
            "h2d": 0,
            "compute": 0.5,
            "comms": 0,
            "eval": 0,
            "checkpoint": 0,
            "log": 0,
            "gc": 0.1,
            "loop": 0.2,
        }
    )
    assert shares(str(tmp_path / "none.jsonl"), 1e9, 5, 1.0) is None
    # a step still in its eval when gputop last read, 3 s into it: counted as far as it went
    opened = {"t": 109.0, "open": "eval", "since": 0.5, "parts": {"compute": 0.5}}
    with path.open("a") as f:
        f.write("\n" + json.dumps(opened) + "\n")
    got = shares(str(path), end=112.0, steps=5, open_after=1.0)  # steps 105..109 and the eval
    assert got["eval"] == pytest.approx(3.0 / 8.5) and got["compute"] == pytest.approx(3.0 / 8.5)
    assert shares(str(path), end=109.5, steps=5, open_after=1.0)["eval"] == 0  # not overdue


def test_a_scripts_clocks_time_its_parts_less_collections_and_its_batches(tmp_path, monkeypatch):
    import gc
    import time

    from _clocks import Clocks

    monkeypatch.setenv("CORPUS_CLOCKS", str(tmp_path))
    clocks = Clocks()
    walls = []
    try:
        for _ in clocks.batches(iter([1, 2])):
            t0 = time.perf_counter()
            with clocks.part("compute"):
                time.sleep(0.02)  # pacing: the work being timed
                gc.collect()
            walls.append(time.perf_counter() - t0)
        clocks.start("eval")
        time.sleep(0.01)  # pacing: the work being timed
        clocks.stop()
        clocks.step()
    finally:
        gc.callbacks.remove(clocks._gc)
        assert clocks.out is not None
        clocks.out.close()
    (path,) = tmp_path.iterdir()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    rows = [x for x in lines if "dur" in x]
    assert [x["open"] for x in lines if "open" in x] == ["eval"]  # a long part's start
    assert len(rows) == 3 and [set(r["parts"]) for r in rows[:2]] == [{"data", "compute", "gc"}] * 2
    first = rows[0]["parts"]
    assert first["gc"] > 0  # the collection, out of the part it ran in
    assert first["compute"] == pytest.approx(walls[0] - first["gc"], abs=1e-3)
    assert rows[2]["parts"]["eval"] >= 0.01


def test_slices_either_name_fits_are_compared_as_one():
    # heavy_logging's metrics logging is side work by what it is and the loop's own Python by
    # what it is made of (its why): the job calls it log, gputop may call it the loop
    truth = {"compute": 0.46, "log": 0.53, "loop": 0.01}
    budget = {"compute": 0.45, "log": 0.0, "loop": 0.55, "comms": 0.001, "straggler": 0.004}
    r = Result(by_name("heavy_logging"), "run", "host-overhead", 3.0, 0, budget=budget,
               truth=truth)  # fmt: skip
    assert r.errors() == [("compute", 0.46, 0.45), ("comms+straggler", 0.0, 0.005),
                          ("log+loop", 0.54, 0.55)]  # fmt: skip
