"""Regenerate the README's screenshots with Textual's own SVG export, from the code as it is:

- docs/screen-monitor.svg: the monitor on a simulated 8x H100 board, each GPU with a different
  problem (a scripted history: the same picture every time);
- docs/screen-attached.svg: the example trainer with no gputop code (examples/mlp_plain.py)
  started plainly with a slow transform in its loop, then attached by PID as `gputop --pid`
  does: its process tree, its stacks, the verdict and the budget line, beside a simulated H100;
- docs/screen-why.svg: the same job's "why" screen (key v), every rule with its numbers;
- docs/screen-full.svg: the full screen at 120x40 beside a two-rank job whose rank 1 is slow
  and which saves a checkpoint every 30 s (the budget over time, each rank's bar, each GPU's
  history), from the readings of the snapshot test (tests/tui/test_room.py's ``scene``).

- docs/report.png (`report`): `gputop report --html`'s page of a recorded corpus session
  (frequent checkpoints on a power-capped simulated H100), as headless Chromium draws it.

    python docs/make_screenshot.py [PICTURE ...] [--seconds S]

PICTURE: monitor, attached (with why), screen, report; all of them by default.

The attached job runs for real, so those two differ a little from run to run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from gputop.config import Config
from gputop.sim import SimBoard, installed
from gputop.sources.nvml import NvmlSource
from gputop.ui.app import GputopApp

DOCS = Path(__file__).resolve().parent
MONITOR, ATTACHED, WHY, FULL = (
    DOCS / f"screen-{n}.svg" for n in ("monitor", "attached", "why", "full")
)
TESTS = DOCS.parent / "tests"
TRAINER_KNOBS = ["--workers", "0", "--slow-transform-ms", "40"]
"""A CPU transform in the training loop: the budget's biggest slice is the batch wait."""


def config() -> Config:
    return Config(themes_dir=Path("/nonexistent"), snapshot_dir=Path("/tmp"))


async def monitor() -> None:
    clock = [1000.0]
    board = SimBoard("h100x8", scenario="mixed", clock=lambda: clock[0], warmup_s=300)
    with installed(board):
        source = NvmlSource.open(clock=lambda: clock[0], wall=lambda: 1.795e9 + clock[0])
        history = []
        for _ in range(60):
            clock[0] += 2.0
            history.append(source.sample())
    app = GputopApp(source, config=config(), simulated=board.short_label, start_sampler=False)
    async with app.run_test(size=(140, 22)) as pilot:
        for samples in history:
            app.take("gpu", samples)
        await pilot.pause()
        MONITOR.write_text(app.export_screenshot(title="gputop demo"))
    print(f"wrote {MONITOR}")


async def attached(seconds: float) -> None:
    """The example trainer started plainly (no gputop code in it), then watched as
    `gputop --pid` does, under Pilot instead of a terminal."""
    import subprocess

    from gputop.commands.gpu_source import Board, open_gpus
    from gputop.commands.live_session import new_session
    from gputop.commands.target import attach
    from gputop.resources import bundled_examples_dir
    from gputop.ui.app import Target

    script = bundled_examples_dir() / "mlp_plain.py"
    # As a user types it: `python mlp_plain.py ...` from the script's folder (argv[0] is what
    # the process pane shows, so no machine's paths reach the picture).
    job = subprocess.Popen(["python", script.name, "--steps", "100000000", *TRAINER_KNOBS],
                           executable=sys.executable, cwd=script.parent,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        board = Board("h100", None, "starved", 0, 120.0, short_label=True)
        gpus = open_gpus(board)
        sources = attach(job.pid)
        session = new_session(gpus)
        app = GputopApp(
            gpus.source,
            config=config(),
            simulated=gpus.simulated,
            host=sources.host,
            target=Target(job.pid, sources.command() or "?"),
            agents=sources.agents,
            stacks=sources.stacks,
            session=session,
        )
        session.start({"simulated": gpus.simulated, "interval": app.interval, "pid": job.pid})
        async with app.run_test(size=(150, 30)) as pilot:
            await asyncio.sleep(seconds)
            await pilot.pause()
            ATTACHED.write_text(app.export_screenshot(title="gputop --pid"))
            await pilot.press("v")
            await pilot.pause()
            WHY.write_text(app.export_screenshot(title="gputop: why"))
        gpus.close()
        session.close()
    finally:
        job.kill()
        job.wait()
    print(f"wrote {ATTACHED} and {WHY}")


async def screen() -> None:
    """The full screen at 120x40 beside a two-rank job: the snapshot test's scene and feed."""
    sys.path[:0] = [str(TESTS / "tui"), str(TESTS)]
    from conftest import FixedAgents  # type: ignore[import-not-found]
    from test_room import JOB, feed_job, scene  # type: ignore[import-not-found]

    from gputop.ui.app import Target

    gpus, readings = scene()
    app = GputopApp(gpus, config=config(), simulated=gpus.label, start_sampler=False,
                    agents=FixedAgents(readings[-1]), target=Target(7000, JOB))  # fmt: skip
    app.recorded = gpus  # type: ignore[attr-defined]
    async with app.run_test(size=(120, 40)) as pilot:
        await feed_job(app, pilot, readings)
        FULL.write_text(app.export_screenshot(title="gputop --pid"))
    print(f"wrote {FULL}")


REPORT = DOCS / "report.png"


def report(seconds: float) -> None:
    """A corpus job recorded by `gputop diagnose --record`, its report page written by
    `gputop report --html` and drawn by headless Chromium (tests/browser.py, as the browser
    test opens it)."""
    import subprocess
    import tempfile

    sys.path.insert(0, str(DOCS.parent / "tests"))
    from browser import open_page, record_corpus

    with tempfile.TemporaryDirectory(prefix="gputop-report-") as tmp:
        recording, page = Path(tmp) / "checkpoints.gputop", Path(tmp) / "report.html"
        record_corpus(recording, seconds)
        subprocess.run([sys.executable, "-m", "gputop", "report", recording.name, "--html",
                        page.name], check=True, cwd=tmp)  # fmt: skip
        opened = open_page(page, Path(tmp) / "report.png", width=1100, height=1900)
        if opened.console or opened.requests:
            raise SystemExit(f"the page logged {opened.console} and asked for {opened.requests}")
        REPORT.write_bytes(opened.screenshot.read_bytes())
    print(f"wrote {REPORT}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pictures", nargs="*", help=f"of {', '.join(PICTURES)} (default: all)")
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the job is watched")
    args = ap.parse_args()
    unknown = [p for p in args.pictures if p not in PICTURES]
    if unknown:
        ap.error(f"no picture named {', '.join(unknown)}: choose from {', '.join(PICTURES)}")
    os.environ["TZ"] = "UTC"
    time.tzset()
    for name in args.pictures or PICTURES:
        make = PICTURES[name]
        made = make(args.seconds)
        if made is not None:  # the TUI's pictures are drawn by Textual's event loop
            asyncio.run(made)


PICTURES: dict[str, Callable[[float], Coroutine[Any, Any, None] | None]] = {
    "monitor": lambda _seconds: monitor(),
    "attached": attached,
    "screen": lambda _seconds: screen(),
    "report": report,
}
"""Each picture's function, by the name on the command line."""


if __name__ == "__main__":
    main()
