"""Key a: loading the agent into the target from the screen. Shown only where it can work (a
target without an agent), it says what it will do and needs, asks, loads on a worker thread
and puts every step and the result on the status line. The plan and the load are stand-ins
here (the real ones: tests/integration/test_inject.py, tests/e2e/test_attach_tmux.py)."""

from __future__ import annotations

from dataclasses import replace

from conftest import agents_sample
from tests_support import until_drawn

from gputop.ui.app import Target
from gputop.ui.screens.load_agent import WORKERS, AgentOffer, LoadAgentScreen
from gputop.ui.widgets import StatusLine

PID = 4242


class FakePlan:
    def __init__(self, todo: bool = True, loaded: bool = False) -> None:
        self.todo = ("x",) if todo else ()
        self.nothing_to_do = loaded
        self.refusals = () if todo or loaded else (self.summary(),)

    def lines(self) -> list[str]:
        return [f"pid {PID} (Python 3.11): gdb queues a pending call", "needs: the same user"]

    def summary(self) -> str:
        return "no debugger to load the agent with: apt-get install gdb"


class FakeReport:
    def line(self) -> str:
        return f"agent loaded into pid {PID}"


class Calls:
    def __init__(self, plan: FakePlan) -> None:
        self.plans = 0
        self.loads = 0
        self._plan = plan

    def plan(self, pid, roles):
        self.plans += 1
        return self._plan

    def load(self, plan, progress):
        self.loads += 1
        progress(f"loading the agent into pid {PID} (gdb)")
        return FakeReport()


def offered(make_app, plan: FakePlan, now: bool = False):
    calls = Calls(plan)
    offer = AgentOffer(PID, now=now, plan=calls.plan, load=calls.load)
    app = make_app(target=Target(PID, "python train.py"), offer=offer)
    return app, calls


def status(app) -> str:
    line = app.query_one(StatusLine)
    return str(line.render()) if line.display else ""


async def test_a_asks_then_loads_and_says_so(make_app):
    app, calls = offered(make_app, FakePlan())
    async with app.run_test(size=(120, 40)) as pilot:
        await until_drawn(pilot, lambda: "press a to load it" in status(app))
        assert calls.plans == 1  # the first look
        assert app.check_action("load_agent", ()) is True
        await pilot.press("a")
        await until_drawn(pilot, lambda: isinstance(app.screen, LoadAgentScreen))
        assert app.screen.lines == FakePlan().lines()
        assert calls.plans == 2 and calls.loads == 0  # nothing done before yes
        await pilot.press("y")
        await until_drawn(pilot, lambda: f"agent loaded into pid {PID}" in status(app))
        assert calls.loads == 1 and not isinstance(app.screen, LoadAgentScreen)
        app.take("agents", replace(agents_sample(), target=PID))  # the agent is connected now
        await pilot.pause()
        assert app.check_action("load_agent", ()) is False  # the key is gone
        assert app.unavailable_reason("load_agent") == "the agent is loaded"


async def test_no_leaves_the_job_alone(make_app):
    app, calls = offered(make_app, FakePlan())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("a")
        await until_drawn(pilot, lambda: isinstance(app.screen, LoadAgentScreen))
        await pilot.press("n")
        await until_drawn(pilot, lambda: "the agent was not loaded" in status(app))
        assert calls.loads == 0 and app.check_action("load_agent", ()) is True


async def test_a_refusal_goes_to_the_status_line_without_asking(make_app):
    app, calls = offered(make_app, FakePlan(todo=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("a")
        await until_drawn(pilot, lambda: "apt-get install gdb" in status(app))
        assert not isinstance(app.screen, LoadAgentScreen) and calls.loads == 0


async def test_attach_flag_loads_at_start_without_asking(make_app):
    app, calls = offered(make_app, FakePlan(), now=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_drawn(pilot, lambda: f"agent loaded into pid {PID}" in status(app))
        assert calls.loads == 1 and calls.plans == 1


async def test_no_key_and_no_line_when_the_agent_is_there_or_nothing_can_be_loaded(make_app):
    app, calls = offered(make_app, FakePlan(todo=False, loaded=True))
    async with app.run_test(size=(120, 40)) as pilot:
        # the first look done, its line (none) drawn: the worker calls back before it ends
        await until_drawn(
            pilot,
            lambda: (
                calls.plans == 1 and all(w.is_finished for w in app.workers if w.group == WORKERS)
            ),
            what="the first look",
        )
        assert "press a" not in status(app)
    plain = make_app()  # no target: no offer, the key is neither shown nor listed
    async with plain.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert plain.check_action("load_agent", ()) is False
        assert all(row[2] != "load_agent" for row in plain.key_legend.rows())


async def test_the_missing_line_goes_when_an_agent_connects_another_way(make_app):
    app, calls = offered(make_app, FakePlan())
    async with app.run_test(size=(120, 40)) as pilot:
        await until_drawn(pilot, lambda: "press a to load it" in status(app))
        app.take("agents", replace(agents_sample(), target=PID))  # the script imported it
        await pilot.pause()
        assert "press a" not in status(app) and calls.loads == 0
