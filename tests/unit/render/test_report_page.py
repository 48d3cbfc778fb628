"""`gputop report FILE --html PAGE` over a recording of known content: two minutes through the
Recorder, two ranks of known splits, a GPU power-capped for a known stretch, a crafted command
line and finding. The budget per 10 s is each rank's split, the bins that held sw_power_cap
are the ones shaded, the recording's text stays text, the page has its parts and nothing that
could run or load, a day of 8 GPUs stays under 4 MB, and the page is written whole, 0600,
never through a planted link."""

from __future__ import annotations

import itertools
import json
import os
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from builders import SECONDS, record_session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests_support import fuzz_examples

from gputop import cli
from gputop.record.fileformat import SUMMARY, Scan, frames, pack
from gputop.record.reader import open_recording
from gputop.record.report import build_report
from gputop.render import report_charts
from gputop.render.report_page import LIST_MAX, TEXT_MAX, build_page, report_page

SHARES = {0: {"compute": 0.8, "data": 0.2}, 1: {"compute": 0.6, "checkpoint": 0.4}}
"""Each rank's step as shares of its budget (the recording's ``SPLITS``)."""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("page") / "session.gputop"
    record_session(path)
    return path


@pytest.fixture(scope="module")
def doc(recorded) -> dict[str, Any]:
    return build_report(open_recording(recorded))


@pytest.fixture(scope="module")
def page(doc) -> str:
    return report_page(doc)


# ---- the numbers ----


def test_the_budget_per_10_s_is_each_ranks_split(doc):
    series = doc["budget_series"]
    assert len(series) >= SECONDS // 10 - 2  # every interval that closed (the last one open)
    for p in series:
        for r in (0, 1):
            got = p["ranks"][str(r)]
            assert got["shares"] == pytest.approx(SHARES[r])
            assert got["steps"] == 100 and got["seconds"] == pytest.approx(10.0)
        assert p["job"] == p["ranks"][p["typical"]]["shares"]
    starts = [p["t_s"] for p in series]
    assert all(b - a == pytest.approx(10.0) for a, b in itertools.pairwise(starts))


def test_the_bins_that_held_sw_power_cap_are_the_ones_shaded(doc, page):
    (gpu,) = doc["gpu_series"]
    assert gpu["max_sm_clock_mhz"] == 1980
    held = [p["t_s"] for p in gpu["points"] if "sw_power_cap" in p["held"]]
    assert held == [40.0, 50.0, 60.0]  # readings 40..69 charge the seconds after them
    assert sum(p["held"].get("sw_power_cap", 0) for p in gpu["points"]) == pytest.approx(30.0)
    assert all(p["power_w"] == 650.0 and p["power_limit_w"] == 700.0 for p in gpu["points"])
    assert report_charts.held_runs(gpu["points"], 1) == [p["t_s"] in held for p in gpu["points"]]
    for part in ("activity", "clock", "power"):
        assert f'id="gpu-0-{part}-throttled"' in page
        assert f'id="gpu-0-{part}"' in page


def test_a_gpu_never_throttled_has_no_shading(doc):
    quiet = {**doc["gpu_series"][0], "points": [
        {**p, "held": {"gpu_idle": 10.0}} for p in doc["gpu_series"][0]["points"]]}  # fmt: skip
    svg = report_charts.gpu_chart(report_charts._pyplot(), quiet, 120.0)
    assert svg is not None and "throttled" not in svg and 'id="gpu-0-power"' in svg


def test_the_step_time_distribution_has_each_rank(doc, page):
    assert [h["rank"] for h in doc["step_hist"]] == [0, 1]
    assert [sum(h["count"]) for h in doc["step_hist"]] == [10 * SECONDS] * 2
    assert 'id="steps-rank-0' in page and 'id="steps-rank-1' in page


# ---- the page ----


def test_the_page_has_every_part_and_every_series(page):
    for section in ("verdicts", "charts", "steps", "throttle", "findings", "captures"):
        assert f'<h2 id="{section}">' in page
    for chart in ("verdict", "budget", "ranks", "steps", "gpu-0"):
        assert f'<figure id="chart-{chart}">' in page
    # the job's budget is its typical rank's (rank 0: no checkpoint); rank 1's bar has it
    for series in ("budget-compute", "budget-data", "verdict-side-work", "ranks-data-job",
                   "ranks-checkpoint-1", "gpu-0-clock-max", "gpu-0-power-limit"):  # fmt: skip
        assert f'id="{series}"' in page
    assert 'id="budget-checkpoint"' not in page and 'id="ranks-checkpoint-0"' not in page
    assert "checkpoint (principal)" not in page  # legend text is drawn as paths, not text
    assert page.count("<svg") == 5


def test_the_page_runs_nothing_and_loads_nothing(page):
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp is not None and csp.group(1).startswith("default-src 'none';")
    assert "<script" not in page.lower()
    assert not re.search(r"<(img|link|iframe|object|embed)\b", page, re.I)
    assert "http://example.invalid" not in page.replace("http://example.invalid/x.png&gt;", "")


def test_the_recordings_text_stays_text(page):
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=http://example.invalid/x.png&gt;"
    assert page.count(escaped) >= 5  # the command, the summary, evidence, lever, capture folder
    assert "<script>" not in page and "<img " not in page


def test_long_texts_are_cut_and_long_lists_say_what_they_left_out(doc):
    f = doc["findings"][0]
    many = {**doc, "findings": [{**f, "summary": "x" * (TEXT_MAX + 100)}] * (LIST_MAX + 7)}
    html = build_page(many, [])
    assert "x" * TEXT_MAX + "... (100 characters more)" in html
    assert "x" * (TEXT_MAX + 1) not in html
    assert "7 more findings left out" in html
    assert html.count('<div class="finding">') == LIST_MAX


def test_a_day_of_eight_gpus_stays_under_4_mb(doc):
    day = 8640
    point = doc["gpu_series"][0]["points"][0]
    gpus = [{"gpu": g, "max_sm_clock_mhz": 1980, "points": [
        {**point, "t_s": 10.0 * i, "power_w": 400.0 + i % 97,
         "held": {"sw_power_cap": 10.0} if i % 2 else {}} for i in range(day)]}
        for g in range(8)]  # fmt: skip
    budget = doc["budget_series"][0]
    big = {**doc, "gpu_series": gpus,
           "budget_series": [{**budget, "t_s": 10.0 * i} for i in range(day)],
           "timeline": [{"t_s": 10.0 * i, "bound": ("side-work", "data-input")[i % 2],
                         "confidence": 0.5, "note": ""} for i in range(day)]}  # fmt: skip
    big["recording"] = {**doc["recording"], "duration_s": 10.0 * day}
    charts = report_charts.charts(big)
    html = build_page(big, charts)
    sizes = sorted((len(svg), name) for name, svg in charts)
    assert len(html.encode()) < 4 << 20, sizes
    assert html.count("<svg") == 5 + 7


def test_thinning_averages_runs_of_bins():
    assert report_charts.thin(720) == 1 and report_charts.thin(721) == 2
    assert report_charts.thin(8640) == 12


# ---- writing it ----


def test_the_page_is_written_0600_and_whole(recorded, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli.main(["report", str(recorded), "--html", str(out)]) == 0
    assert os.stat(out).st_mode & 0o777 == 0o600
    assert out.read_text().rstrip().endswith("</html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no partial left beside it
    assert str(out) in capsys.readouterr().out


def test_a_link_planted_at_the_page_or_a_partial_name_is_not_followed(recorded, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    shared = tmp_path / "shared"
    shared.mkdir()
    page = shared / "r.html"
    page.symlink_to(victim)
    (shared / "r.html.partial").symlink_to(victim)
    assert cli.main(["report", str(recorded), "--html", str(page)]) == 0
    assert victim.read_text() == "keep me"
    assert not page.is_symlink() and "<!DOCTYPE html>" in page.read_text()


def test_a_page_that_cannot_be_written_is_one_line(recorded, tmp_path, capsys):
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert cli.main(["report", str(recorded), "--html", str(blocked / "r.html")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot write" in err and "Traceback" not in err


def test_no_charts_leaves_the_page_without_them(recorded, tmp_path):
    out = tmp_path / "r.html"
    assert cli.main(["report", str(recorded), "--html", str(out), "--no-charts"]) == 0
    html = out.read_text()
    assert "<svg" not in html and "nothing was recorded to chart" not in html
    assert '<h2 id="findings">' in html


def test_html_and_json_together_is_a_usage_error(recorded, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["report", str(recorded), "--html", "x.html", "--json"])
    assert stop.value.code == 2
    assert "give one of them" in capsys.readouterr().err


# ---- a crafted recording: one line, never a broken page ----


def _summaries(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as f:
        found = list(frames(f, str(path), Scan(), skip_data=True))
    return [json.loads(zlib.decompress(fr.payload)) for fr in found if fr.kind == SUMMARY]


def _with_summary(recorded: Path, folder: Path, part: dict[str, Any]) -> Path:
    path = folder / "crafted.gputop"
    path.write_bytes(recorded.read_bytes()
                     + pack(SUMMARY, 0, 1e9, zlib.compress(json.dumps(part).encode())))  # fmt: skip
    return path


CRAFTED_PARTS = {
    "typical rank not among the ranks": ("budget_points",
                                         {"9": {"start": 1.0, "typical": "5", "ranks": {}}}),
    "a slice no budget has": ("budget_points",
                              {"9": {"start": 1.0, "typical": "0",
                                     "ranks": {"0": [1.0, 1, {"<b>": 1.0}]}}}),
    "a rank of another shape": ("budget_points",
                                {"9": {"start": 1.0, "typical": "0", "ranks": {"0": "x"}}}),
    "a bin that is no number": ("gpu_points", {"x9": {"0": [1, 1.0, 1, 1, 1, 1, 1, 1, {}]}}),
    "an interval with no start": ("budget_points",
                                  {"9": {"typical": "0", "ranks": {"0": [1.0, 1, {}]}}}),
    "a GPU point too short": ("gpu_points", {"9": {"0": [1, 2, 3]}}),
    "a held reason that is no number": ("gpu_points",
                                        {"9": {"0": [1, 1.0, 1, 1, 1, 1, 1, 1, {"a": "b"}]}}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CRAFTED_PARTS))
def test_a_crafted_series_is_one_line_and_the_page_says_where(recorded, tmp_path, capsys, name):
    key, value = CRAFTED_PARTS[name]
    part = _summaries(recorded)[0]
    part[key] = value
    path = _with_summary(recorded, tmp_path, part)
    out = tmp_path / "r.html"
    assert cli.main(["report", str(path), "--html", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "damaged at byte" in err, err
    html = out.read_text()
    assert "the file damaged at byte" in html and html.rstrip().endswith("</html>")


@settings(max_examples=fuzz_examples(15), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.data())
def test_series_of_any_numbers_the_reader_lets_through_draw_a_page(recorded, tmp_path, data):
    numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                        st.integers(-(10**15), 10**15))  # fmt: skip
    part = _summaries(recorded)[0]
    for bins in part["gpu_points"].values():
        for p in bins.values():
            i = data.draw(st.integers(0, 7))
            p[i] = data.draw(numbers)
            p[8] = {data.draw(st.sampled_from(["sw_power_cap", "<i>x</i>"])): data.draw(numbers)}
    for b in part["budget_points"].values():
        for r in b["ranks"].values():
            r[0] = data.draw(numbers)
            r[2] = {data.draw(st.sampled_from(["compute", "data", "gc"])): data.draw(numbers)}
    recording = open_recording(_with_summary(recorded, tmp_path, part))
    doc = build_report(recording)
    json.loads(json.dumps(doc), parse_constant=_no_constant)  # JSON with no NaN or Infinity
    html = report_page(doc)
    assert html.rstrip().endswith("</html>") and "<i>x</i>" not in html


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} in the report's JSON")
