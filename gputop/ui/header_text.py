"""The header line, pure: who is watched (or that nothing is), the boards and the driver, the
time of the last reading and the refresh state (PAUSED), fitted to the width."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from gputop.model import DeviceInfo
from gputop.model.host import HostSample
from gputop.ui.gpu_text import short_name


def header_line(
    target: str | None,
    host: HostSample | None,
    devices: Sequence[DeviceInfo],
    driver: str | None,
    walls: Iterable[float],
    refresh: str,
    width: int,
) -> str:
    """``target``: the attached process as the header names it (None: no target); ``host``:
    its latest reading (an exited target says so); ``walls``: the readings' wall clocks;
    ``refresh``: the refresh state (every 2s, PAUSED)."""
    who = target or "no target"
    if host is not None and host.state == "exited":
        code = host.exit_code
        who = f"pid {host.pid} EXITED" + (f" (status {code})" if code is not None else "")
    names = {short_name(d.name) for d in devices}
    board = f"{len(devices)}x {', '.join(sorted(names))}" if devices else "no GPU"
    drv = f"  drv {driver}" if driver is not None else ""
    last = max(walls, default=None)
    when = time.strftime("%H:%M:%S", time.localtime(last)) if last is not None else "--:--:--"
    return header_text(who, board, drv, f"{when} {refresh}", width)


def header_text(who: str, board: str, driver: str, when: str, width: int) -> str:
    """The header for ``width`` columns: the driver goes first, then the command is cut; the
    time and the refresh state (PAUSED) always show."""
    text = f"gputop  {who}  {board}{driver}  {when}"
    if len(text) <= width:
        return text
    text = f"gputop  {who}  {board}  {when}"
    over = len(text) - width
    if over > 0 and len(who) > 12:
        keep = max(12, len(who) - over - 1)
        text = f"gputop  {who[:keep].rstrip()}…  {board}  {when}"
    return text
