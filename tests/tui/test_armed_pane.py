"""Armed captures on the screen: the evaluation that calls a step-time regression starts the
capture that fits it at once, and the captures pane shows it as armed, with the trigger."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from conftest import FixedAgents, ingest_all, record
from test_change_pane import readings

from gputop.arm.armed import Armed
from gputop.session import Session
from gputop.ui.app import Target
from gputop.ui.panes.captures import CapturesPane


class Taken:
    """``capture.take`` as far as the screen sees it: started in a folder, ended ok."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kinds: list[str] = []

    def __call__(self, kind, pid, root, bounds, cancel, **kw):
        self.kinds.append(kind)
        folder = self.root / f"{len(self.kinds)}-{kind}"
        kw["started"](folder)
        return SimpleNamespace(status="ok", reason=""), folder


async def test_a_regression_takes_its_capture_and_the_pane_says_it_was_armed(make_app, tmp_path):
    gpus = record("h100", "compute", ticks=45, step=0.9)
    now = readings(120, lambda n: 5.0 if n < 700 else 30.0, workers=4)
    taken = Taken(tmp_path)
    armed = Armed(100, tmp_path / "caps", frozenset({"regression"}), take=taken,
                  start=lambda work, name: work(), age=lambda: 600.0,
                  after_wait_s=0)  # fmt: skip
    app = make_app(gpus, agents=FixedAgents(now[-1]), target=Target(100, "python train.py"),
                   session=Session(gpus.devices), armed=armed)  # fmt: skip
    async with app.run_test(size=(140, 50)) as pilot:
        await ingest_all(app, pilot)
        for r in now[:-1]:
            app.session.take("agents", r, evaluate=False)
        app.take("agents", now[-1])  # the evaluation that calls the shift
        assert taken.kinds == ["torch-trace"]  # at that evaluation, not a tick later
        app._settle()
        await pilot.pause()
        pane = app.query_one(CapturesPane)
        assert pane.display
        text = pane.text()
        assert "armed regression: torch trace of pid 100" in text and "ok" in text
