"""`gputop report` over a recording in a fresh Python: the text report does not import
matplotlib, and the HTML page is drawn with a home directory that cannot exist. It starts a
process because only a new interpreter shows what the command imports and where it writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import record_session

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("page") / "session.gputop"
    record_session(path)
    return path


def test_the_text_report_does_not_import_matplotlib_and_the_page_needs_no_writable_home(
    recorded, tmp_path
):
    code = ("import sys; from gputop import cli; cli.main(['report', sys.argv[1]]); "
            "assert 'matplotlib' not in sys.modules; "
            "cli.main(['report', sys.argv[1], '--html', sys.argv[2]]); "
            "assert 'matplotlib' in sys.modules")  # fmt: skip
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    home = blocker / "home"  # cannot exist, even for root: no matplotlib cache can go there
    env = {k: v for k, v in os.environ.items() if k != "MPLCONFIGDIR"}
    r = subprocess.run([sys.executable, "-c", code, str(recorded), str(tmp_path / "p.html")],
                       capture_output=True, text=True, env={**env, "HOME": str(home)},
                       timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Matplotlib" not in r.stderr and (tmp_path / "p.html").exists()
