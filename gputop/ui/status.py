"""What the status line says, in order: why the last key pressed could not work (for a few
seconds), how the job or the target ended, a source in trouble (a driver that stopped
answering), the agent's line, and the problems that stay (config, theme and key files skipped;
outputs that stopped: a disk full, a port taken)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from textual.app import App
from textual.timer import Timer

from gputop.model.host import HostSample

if TYPE_CHECKING:  # a job exists only under `gputop run`, which imports it
    from gputop.run import Job

FLASH_S = 5.0
"""How long the status line says why a key cannot work now."""


class StatusLines:
    """The status line's sources; ``draw``: the app draws the line again (on its thread)."""

    def __init__(self, app: App, problems: Iterable[str], draw: Callable[[], None]) -> None:
        self._app = app
        self._draw = draw
        self.problems = list(problems)
        """Lines that stay: the files' problems, then the session's as they come."""
        self._seen = 0
        """How many of the session's problems are in ``problems`` already."""
        self.trouble = ""
        """A source in trouble (empty: none, or over)."""
        self.flash = ""
        """Why the last key pressed could not work."""
        self._flash_timer: Timer | None = None

    def say_briefly(self, line: str) -> None:
        """``line`` on the status line for ``FLASH_S`` seconds."""
        self.flash = line
        self._draw()
        if self._flash_timer is not None:
            self._flash_timer.stop()
        self._flash_timer = self._app.set_timer(FLASH_S, self._end_flash)

    def _end_flash(self) -> None:
        self.flash, self._flash_timer = "", None
        self._draw()

    def new_problems(self, session: Sequence[str]) -> bool:
        """The session has problems the line does not say yet."""
        return len(session) > self._seen

    def lines(self, ended: str | None, agent: str, session: Sequence[str]) -> list[str]:
        """The line's text: ``ended``, how the job or target ended (None: it runs); ``agent``,
        the agent's line (empty: none); ``session``, the session's problems so far."""
        self.problems += session[self._seen :]
        self._seen = len(session)
        lines = [self.flash] if self.flash else []
        if ended is not None:
            lines.append(f"{ended}: q quits")
        if self.trouble:
            lines.append(self.trouble)
        if agent:
            lines.append(agent)
        return lines + self.problems


def how_it_ended(job: Job | None, host: HostSample | None) -> str | None:
    """How the job (gputop run) or the attached target ended, once it has; else None."""
    if job is not None:
        status = job.exit_status()
        return f"the job ended (status {status})" if status is not None else None
    if host is not None and host.state == "exited":
        code = f" with status {host.exit_code}" if host.exit_code is not None else ""
        return f"pid {host.pid} exited{code}"
    return None
