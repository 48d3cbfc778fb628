"""The monitor's app stays an app: its drawing, key tables, themes, samplers and the agent-loading
flow live in modules of their own (issue 39 took it from 924 lines to 450). A feature that
needs the app to grow belongs beside it (``ui/panes.py``, ``ui/keys.py``, ...): this fails
first, as the room's resize hook nearly took it to 451."""

from __future__ import annotations

from pathlib import Path

import gputop.ui.app

APP_LINES_MAX = 450


def test_the_app_module_stays_at_most_450_lines():
    lines = Path(gputop.ui.app.__file__).read_text().count("\n")
    assert lines <= APP_LINES_MAX, f"gputop/ui/app.py has {lines} lines (at most {APP_LINES_MAX})"
