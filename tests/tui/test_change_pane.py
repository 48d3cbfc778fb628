"""The change pane: a job watched again shows this run against its last (the step's change with
its interval, the slice that moved, the setting that changed), and a shift of step time inside
the run is said there and marked under the budget chart's interval."""

from __future__ import annotations

from builders import agent, step
from conftest import FixedAgents, ingest_all, record

from gputop.history.store import Memory
from gputop.model.steps import AgentsSample
from gputop.session import Session
from gputop.ui.app import Target
from gputop.ui.panes.change import ChangePane
from gputop.ui.panes.chart import BudgetChart

MS = 1_000_000


def readings(seconds: int, data_ms, workers: int, t0: float = 1000.0) -> list[AgentsSample]:
    """A reading a second of a job stepping 10 times a second, ``data_ms(n)`` of data wait."""
    out, history, t_ns = [], [], 0
    for t in range(1, seconds + 1):
        for _ in range(10):
            s = step(len(history), t_ns, {"forward": 80.0, "data_wait": data_ms(len(history))})
            history.append(s)
            t_ns += s.dur_ns
        a = agent(100, tuple(history[-300:]), argv=("train.py",), cwd="/proj",
                  fingerprint={"dataloader": {"num_workers": workers}})  # fmt: skip
        out.append(AgentsSample(target=100, t=t0 + t, wall=1.7e9 + t, agents=(a,)))
    return out


async def test_a_run_against_the_last_and_a_shift_inside_it(make_app, tmp_path):
    memory = Memory(tmp_path / "jobs")
    last = Session((), memory=memory, run_id="last")
    for r in readings(30, lambda n: 40.0, workers=0):
        last.agents(r)
    last.close()
    gpus = record("h100", "compute", ticks=45, step=0.9)
    now = readings(120, lambda n: 5.0 if n < 700 else 30.0, workers=4)
    session = Session(gpus.devices, memory=Memory(tmp_path / "jobs"), run_id="now")
    app = make_app(gpus, agents=FixedAgents(now[-1]), target=Target(100, "python train.py"),
                   session=session)  # fmt: skip
    async with app.run_test(size=(140, 50)) as pilot:
        await ingest_all(app, pilot)
        for r in now[:-1]:
            app.session.take("agents", r, evaluate=False)
        app.take("agents", now[-1])
        await pilot.pause()
        await pilot.pause()
        pane = app.query_one(ChangePane)
        assert pane.display
        text = pane.text()
        assert "vs last run" in text and "steps): step 120 ms ->" in text
        assert "dataloader.num_workers 0 -> 4" in text
        assert "step time shifted at step 70" in text and "data wait +25 ms/step" in text
        assert "; since then +2" in text
        chart = app.query_one(BudgetChart)
        assert chart.display
        assert "▲ step shift" in chart.text()
        assert chart.text().splitlines()[-1].count("▲") == 1
