"""`gputop report --html` of a recorded corpus session, opened in Debian's headless Chromium
(.ci/run installs it): the page logs nothing to the console, makes no request, holds every
chart's series, and its screenshot shows the budget's slices, the GPU's line and its throttled
stretch in their colours. A planted page that logs and fetches is caught by the same checks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser import REPO, chromium, open_page, record_corpus

from gputop.render.report_charts import SLICE_COLOURS, THROTTLED
from gputop.vocab import budget as b

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        chromium() is None,
        reason="no Chromium (apt-get install chromium-headless-shell; .ci/run installs it)",
    ),
]
SECONDS = 20.0
"""The corpus job watched: its first steps came at 2-3 s here, so one 10-s interval of the
budget over time closes by 13 s; 20 s leaves a busy core's slower torch import 7 s more."""


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser")
    recording = folder / "ckpt.gputop"
    record_corpus(recording, SECONDS)
    page = folder / "ckpt.html"
    cmd = [sys.executable, "-m", "gputop", "report", str(recording), "--html", str(page)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    return open_page(page, folder / "ckpt.png")


def test_the_page_logs_nothing_and_requests_nothing(opened):
    assert opened.console == []
    assert opened.requests == []


def test_the_dom_holds_every_charts_series(opened):
    dom = opened.dom
    ids = set(re.findall(r'\bid="([^"]+)"', dom))
    assert {"budget-compute", "budget-checkpoint", "ranks-checkpoint-job", "gpu-0-activity",
            "gpu-0-clock", "gpu-0-clock-max", "gpu-0-power", "gpu-0-power-limit",
            "gpu-0-power-throttled"} <= ids, sorted(ids)  # fmt: skip
    assert any(i.startswith("steps-rank-0") for i in ids)
    assert any(i.startswith("verdict-") for i in ids)
    for series in ("budget-compute", "budget-checkpoint", "gpu-0-power"):  # drawn, not empty
        group = re.search(rf'<g id="{series}">(.*?)</g>', dom, re.S)
        assert group is not None and re.search(r'<path [^>]*d="M [^"]{20,}', group.group(1))
    assert dom.count("<svg") >= 5


def _colours(png: Path) -> dict[tuple[int, int, int], int]:
    from PIL import Image

    with Image.open(png) as im:
        counts = im.convert("RGB").getcolors(maxcolors=1 << 20) or []
    return {rgb: n for n, rgb in counts}


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def test_the_screenshot_shows_the_slices_and_the_throttled_stretch(opened):
    colours = _colours(opened.screenshot)
    for colour in (SLICE_COLOURS[b.COMPUTE], SLICE_COLOURS[b.CHECKPOINT], THROTTLED):
        assert colours.get(_rgb(colour), 0) > 2000, colour  # an area, not a legend's swatch


def test_a_page_that_logs_and_fetches_is_caught(tmp_path):
    planted = tmp_path / "planted.html"
    planted.write_text('<!DOCTYPE html><html><body><p>planted</p><script>console.log("hi '
                       'from the page")</script><img src="http://127.0.0.1:9/x.png"></body>'
                       "</html>")  # fmt: skip
    got = open_page(planted, tmp_path / "planted.png", 400, 300)
    assert any("hi from the page" in m for m in got.console), got.console
    assert got.requests == ["http://127.0.0.1:9/x.png"]
    assert _colours(got.screenshot).get(_rgb(SLICE_COLOURS[b.COMPUTE]), 0) == 0
