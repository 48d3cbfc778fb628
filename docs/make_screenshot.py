"""Regenerate docs/gputop.svg, the README's screenshot: Textual's own SVG export of the
monitor on a simulated 8x H100 board with throttled GPUs.

    python docs/make_screenshot.py
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from gputop.config import Config
from gputop.sim import SimBoard, installed
from gputop.sources.nvml import NvmlSource
from gputop.ui.app import GputopApp

OUT = Path(__file__).resolve().parent / "gputop.svg"


async def main() -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    clock = [1000.0]
    board = SimBoard("h100x8", scenario="mixed", clock=lambda: clock[0], warmup_s=300)
    with installed(board):
        source = NvmlSource.open(clock=lambda: clock[0], wall=lambda: 1.795e9 + clock[0])
        history = []
        for _ in range(60):
            clock[0] += 2.0
            history.append(source.sample())
    config = Config(themes_dir=Path("/nonexistent"), snapshot_dir=Path("/tmp"))
    app = GputopApp(source, config=config, simulated=board.short_label, start_sampler=False)
    async with app.run_test(size=(140, 22)) as pilot:
        for samples in history:
            app.ingest(samples)
        await pilot.pause()
        OUT.write_text(app.export_screenshot(title="gputop demo"))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
