"""A recorded corpus session and its HTML report opened in Debian's headless Chromium, as a
person would open it: what it drew (a screenshot), what it logged to the console and every
request it made (Chromium's own net log). Used by tests/integration/test_report_browser.py and
docs/make_screenshot.py (the README's picture of the report)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BROWSERS = ("chromium-headless-shell", "chromium")
"""Debian's packages: the headless shell (what .ci/run installs), or the full browser."""
CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] (.*)")
"""A console message in Chromium's log (``--enable-logging=stderr --v=0``)."""


def chromium() -> str | None:
    return next((p for b in BROWSERS if (p := shutil.which(b))), None)


def record_corpus(path: Path, seconds: float = 15.0, script: str = "frequent_checkpoints.py"
                  ) -> None:  # fmt: skip
    """``gputop diagnose --record`` of a corpus trainer on a power-capped simulated H100, the
    job started as a user types it (``python SCRIPT`` in its folder: no machine's paths in
    the recording's command line)."""
    corpus = REPO / "tests" / "corpus"
    cmd = [sys.executable, "-m", "gputop", "diagnose", "--duration", str(seconds),
           "--record", str(path.resolve()), "--sim-board", "h100", "--sim-scenario",
           "power-throttled", "--", "python", script,
           "--seconds", str(int(seconds) + 60)]  # fmt: skip
    # `python` is this interpreter, and `-m gputop` this checkout's from the corpus folder
    first = {"PATH": os.path.dirname(sys.executable), "PYTHONPATH": str(REPO)}
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    for k, v in first.items():
        env[k] = os.pathsep.join(filter(None, [v, os.environ.get(k)]))
    subprocess.run(cmd, cwd=corpus, env=env, capture_output=True, timeout=seconds + 120)
    if not path.exists():
        raise RuntimeError(f"gputop diagnose wrote no recording at {path}")


@dataclass(frozen=True)
class Opened:
    dom: str
    """The page's DOM as Chromium built it (``--dump-dom``)."""
    console: list[str]
    """Every console message it logged."""
    requests: list[str]
    """Every URL its net log saw a request for (a file:// page's own load is not one)."""
    screenshot: Path


def open_page(page: Path, out: Path, width: int = 1200, height: int = 2600) -> Opened:
    """``page`` opened offline in headless Chromium: its DOM, console and requests, and a
    screenshot of ``width`` x ``height`` at ``out``."""
    browser = chromium()
    if browser is None:
        raise RuntimeError(f"no Chromium: apt-get install {BROWSERS[0]}")
    url = page.resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="gputop-chromium-") as tmp:
        net = Path(tmp) / "net.json"
        common = [browser, "--headless", "--no-sandbox", "--disable-gpu",
                  "--no-first-run", f"--user-data-dir={tmp}/profile",
                  "--enable-logging=stderr", "--v=0"]  # fmt: skip
        dumped = subprocess.run([*common, f"--log-net-log={net}", "--dump-dom", url],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        requests = _requests(net)
        shot = subprocess.run([*common, f"--window-size={width},{height}",
                               "--hide-scrollbars", f"--screenshot={out}", url],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    console = [m.group(1) for line in (dumped.stderr + shot.stderr).splitlines()
               if (m := CONSOLE.search(line))]  # fmt: skip
    if not out.exists():
        raise RuntimeError(f"Chromium wrote no screenshot: {shot.stderr[-500:]}")
    return Opened(dumped.stdout, console, requests, out)


def _requests(net: Path) -> list[str]:
    log = json.loads(net.read_text())
    return sorted({e["params"]["url"] for e in log.get("events", [])
                   if isinstance(e.get("params"), dict) and "url" in e["params"]})  # fmt: skip
