"""What a long diagnosis says while it runs (``Feedback``)."""

from __future__ import annotations

from typing import Any

from gputop.headless.loop import Diagnosis
from gputop.headless.text import armed_line, exit_line, timeline_line


class Feedback:
    """What a long diagnosis says while it runs, so a user is not left with a silent terminal:
    on a terminal, the timeline lines as the verdict changes (then the findings at the end, not
    the timeline again); with --json or a redirected stdout, a progress line on stderr when
    that is a terminal (redrawn in place, erased at the end). Nothing on a pipe: the output
    a script reads is unchanged."""

    def __init__(
        self, out: Any, err: Any, duration: float, json_out: bool, lines: bool = False
    ) -> None:
        """``lines``: a line per event on stdout whatever it is (`gputop watch`: a shell loop
        or a log reads them)."""
        self.out, self.err = out, err
        self.duration = duration
        self.stream = lines or (not json_out and _tty(out))
        """Timeline lines (and armed captures' events) go to stdout as they come."""
        self.line = not self.stream and _tty(err)
        """A progress line on stderr."""
        self._printed = 0
        self._armed = 0
        self._exit_said = False
        self._width = 0

    def start(self, what: str) -> None:
        """One line saying what is watched and for how long (stderr)."""
        print(f"gputop: {what}", file=self.err, flush=True)
        if self.stream:
            print("gputop diagnose", file=self.out, flush=True)

    def __call__(self, d: Diagnosis, elapsed: float) -> None:
        if self.stream:
            for e in d.timeline[self._printed :]:
                if d.target_exit and not self._exit_said and e["t_s"] >= d.target_exit["t_s"]:
                    self._say_exit(d)
                print(timeline_line(e), file=self.out, flush=True)
            self._printed = len(d.timeline)
            for a in d.armed[self._armed :]:
                print(armed_line(max(0.0, a.t - d.started), a.line()), file=self.out,
                      flush=True)  # fmt: skip
            self._armed = len(d.armed)
            if d.target_exit and not self._exit_said:
                self._say_exit(d)
        elif self.line:
            label = d.label or "starting"
            of = f"/{self.duration:g}" if self.duration != float("inf") else ""
            text = f"gputop: {elapsed:.0f}{of} s  {label}"[:79]
            self.err.write("\r" + text.ljust(self._width))
            self.err.flush()
            self._width = len(text)

    def end(self) -> None:
        if self.line and self._width:
            self.err.write("\r" + " " * self._width + "\r")
            self.err.flush()

    def _say_exit(self, d: Diagnosis) -> None:
        assert d.target_exit is not None
        print(exit_line(d.target_exit), file=self.out, flush=True)
        self._exit_said = True


def _tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
