"""The host pane: driven with Pilot, snapshotted, and fed by a real process."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FixedHost, host_sample, ingest_all, record
from tests_support import until_drawn

from gputop.config import Config
from gputop.ui.app import GputopApp, Target
from gputop.ui.panes.host import HostPane
from gputop.ui.widgets import HeaderLine, StatusLine

SIZES = {"compact": (80, 24), "wide": (160, 48)}


def pane(app: GputopApp) -> str:
    return app.query_one(HostPane).text()


async def test_host_pane_shows_cpu_workers_cgroup_and_pressure(make_app):
    app = make_app(host=FixedHost(host_sample()), target=Target(4242, "python train.py"))
    async with app.run_test(size=(160, 48)) as pilot:
        await ingest_all(app, pilot)
        app.take("host", host_sample())
        await pilot.pause()
        text = pane(app)
        assert "CPU 4.0 of 4.0 (cgroup quota)  threads running 5  run-queue wait 0.6" in text
        assert "OMP 64" in text
        assert "workers 4: 97% 95% 99% 93% (4 pegged)" in text
        assert "throttled 62% of periods" in text
        assert "memory 29.0/32.0G" in text
        assert "PSI(cgroup) cpu 31%" in text
        assert "pid 4242: python train.py" in str(app.query_one(HeaderLine).render())


async def test_exited_target_is_said_and_gpus_go_on(make_app):
    app = make_app(host=FixedHost(host_sample()), target=Target(4242, "python train.py"))
    async with app.run_test() as pilot:
        app.take("host", host_sample("exited"))
        await ingest_all(app, pilot)
        assert "pid 4242 exited with status 137; the GPU rows go on" in pane(app)
        assert "pid 4242 EXITED (status 137)" in str(app.query_one(HeaderLine).render())
        assert "pid 4242 exited with status 137: q quits" in str(app.query_one(StatusLine).render())
        assert "SM" in app.query_one("#gpu-0").text()


async def test_pause_freezes_the_host_pane_too(make_app):
    app = make_app(host=FixedHost(host_sample()))
    async with app.run_test() as pilot:
        app.take("host", host_sample())
        await pilot.press("space")
        app.take("host", host_sample("exited"))
        await pilot.pause()
        assert "exited" not in pane(app)
        await pilot.press("space")
        await pilot.pause()
        assert "exited" in pane(app)


async def test_a_real_process_feeds_the_pane_through_the_sampler_thread():
    from gputop.sim import SimBoard, installed
    from gputop.sources.host import HostSource
    from gputop.sources.nvml import NvmlSource

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with installed(SimBoard("t4")):
            src = NvmlSource.open()
            host = HostSource.open(child.pid)
            app = GputopApp(src, config=Config(interval=0.5), host=host)
            async with app.run_test() as pilot:
                await until_drawn(
                    pilot,
                    lambda: app.session.state.host is not None and "main" in pane(app),
                    timeout=20,
                    what="the sampler's first host reading drawn",
                )
                assert "main" in pane(app) and "CPU" in pane(app)
            src.close()
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("size", SIZES)
def test_host_pane_snapshot(snap_compare, make_app, size):
    app = make_app(
        record("h100x8", "starved", ticks=30, step=0.9),
        host=FixedHost(host_sample()),
        target=Target(4242, "python train.py --workers 4"),
    )

    async def feed(pilot):
        await ingest_all(app, pilot)
        app.take("host", host_sample())
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=feed)
