"""The capture keys and the captures pane: a real py-spy capture of a real process from the
TUI, its progress, a cancel, a failure in words, and snapshots of the pane at two sizes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import fed, record
from tests_support import until_drawn

from gputop.ui.app import Target
from gputop.ui.panes.captures import CapturesPane, CaptureView

SLEEPER = "import time\nwhile True: time.sleep(0.01)"


@pytest.fixture
def python_target():
    job = subprocess.Popen([sys.executable, "-c", SLEEPER])
    yield job
    job.kill()
    job.wait()


async def wait_for(pilot, app, done, seconds: float = 30.0):
    try:
        await until_drawn(pilot, done, timeout=seconds, what="the capture")
    except AssertionError:
        raise AssertionError(f"still {list(app.capture_keys.views.values())}") from None


async def test_f_records_a_flame_graph_and_the_pane_follows_it(make_app, python_target, tmp_path):
    app = make_app(target=Target(python_target.pid, "python -c ..."))
    app.capture_keys.seconds, app.capture_keys.capture_dir = 1.0, str(tmp_path / "caps")
    async with app.run_test(size=(160, 48)) as pilot:
        assert not app.query_one(CapturesPane).display  # nothing asked for yet
        await pilot.press("f")
        await pilot.pause()
        pane = app.query_one(CapturesPane)
        assert pane.display and "flame graph of pid" in pane.text()
        assert app.check_action("capture_flame", ()) is None  # one at a time: dimmed
        await wait_for(pilot, app, lambda: not app.capture_keys.running)
        (view,) = app.capture_keys.views.values()
        assert view.status == "ok", view
        assert f"flame graph of pid {python_target.pid}  ok" in pane.text()
        assert view.folder in pane.text()
    (folder,) = (tmp_path / "caps").iterdir()
    assert json.loads((folder / "manifest.json").read_text())["status"] == "ok"
    assert (folder / "flame.svg").is_file()


async def test_x_cancels_a_running_capture(make_app, python_target, tmp_path):
    app = make_app(target=Target(python_target.pid, "python -c ..."))
    app.capture_keys.seconds, app.capture_keys.capture_dir = 30.0, str(tmp_path / "caps")
    async with app.run_test(size=(160, 48)) as pilot:
        assert app.check_action("cancel_capture", ()) is None  # nothing to cancel yet
        await pilot.press("f")
        views = app.capture_keys.views
        await until_drawn(pilot, lambda: any(v.done >= 1.0 for v in views.values()), timeout=30,
                          what="py-spy recording for a second")  # fmt: skip
        await pilot.press("x")
        await wait_for(pilot, app, lambda: not app.capture_keys.running)
        (view,) = app.capture_keys.views.values()
        assert view.status == "cancelled", view


async def test_a_capture_that_cannot_work_says_why(make_app, tmp_path):
    sleeper = subprocess.Popen(["sleep", "30"])  # not a Python process
    try:
        app = make_app(target=Target(sleeper.pid, "sleep 30"))
        app.capture_keys.capture_dir = str(tmp_path / "caps")
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("c")
            await wait_for(pilot, app, lambda: not app.capture_keys.running)
            (view,) = app.capture_keys.views.values()
            assert view.status == "failed"
            assert "is not a Python process" in app.query_one(CapturesPane).text()
    finally:
        sleeper.kill()
        sleeper.wait()


async def test_capture_keys_are_dimmed_without_a_target(make_app):
    app = make_app()
    async with app.run_test():
        assert app.check_action("capture_flame", ()) is None
        assert app.unavailable_reason("capture_dump") == "needs a target (--pid or gputop run)"


VIEWS = (
    CaptureView(1, "pyspy-dump", 4242, "failed",
                reason="not allowed to read pid 4242's memory (ptrace): run gputop as the same "
                "user or root"),
    CaptureView(2, "pyspy-dump", 4242, "ok",
                folder="gputop-captures/20261122T024644Z-pyspy-dump-box"),
    CaptureView(3, "pyspy-flame", 4242, "running", done=4, total=10, unit="s",
                folder="gputop-captures/20261122T024650Z-pyspy-flame-box"),
)  # fmt: skip
SIZES = {"compact": (80, 24), "wide": (160, 48)}


@pytest.mark.parametrize("size", SIZES)
def test_captures_pane_snapshot(snap_compare, make_app, size):
    app = make_app(record("h100x2", "starved", ticks=10), target=Target(4242, "python train.py"))

    feed = fed(app, *(lambda v=v: app.show_capture(v) for v in VIEWS))
    assert snap_compare(app, terminal_size=SIZES[size], run_before=feed)


async def test_r_is_dimmed_without_an_agent_and_says_how(make_app, python_target):
    app = make_app(target=Target(python_target.pid, "python -c ..."))
    async with app.run_test():
        assert app.check_action("capture_trace", ()) is None
        assert "needs gputop's agent" in app.unavailable_reason("capture_trace")


async def test_py_spy_keys_are_dimmed_when_ptrace_is_denied(make_app):
    from conftest import FixedStacks

    from gputop.model.stacks import ProcessStacks, StacksSample

    denied = "not allowed to read pid 4242's memory (ptrace): run gputop as the same user or root"
    sample = StacksSample(4242, 1.0, 0.0, (ProcessStacks(4242, "main", (), denied, 0.01),))
    app = make_app(stacks=FixedStacks([sample]), target=Target(4242, "python train.py"))
    async with app.run_test():
        app.take("stacks", sample)
        assert app.check_action("capture_flame", ()) is None
        assert app.unavailable_reason("capture_dump") == denied
