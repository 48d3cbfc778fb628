"""The errors a user can cause or fix, as one family: each class says the exit status gputop
ends with, whether the command's usage goes with its message (as argparse's own errors), and
when it happens. ``cli.main`` turns any of them into one line and that status; the manual's
EXIT STATUS and README's "Exit status" are the table made from them (``exit_status_table``).

Standard library only and below every layer but the agent: sources, the simulator, recordings,
captures and commands all raise these. Exceptions caught where they are raised (a damaged
record, a lost device) stay plain Python exceptions.
"""

from __future__ import annotations

from typing import ClassVar


class GputopError(Exception):
    """Something the user can cause or fix; the message is one line saying what and what to do.
    Raise one of the status classes below (or a subclass), never this one."""

    exit_status: ClassVar[int] = 1
    with_usage: ClassVar[bool] = False
    """The message goes after the command's usage (``parser.error``; exit status 2)."""
    when: ClassVar[str] = "gputop could not do what was asked"
    """One line for the documentation: when a user meets this error."""


class CannotDo(GputopError):
    """The request was fine, but the machine or the target does not allow it now."""

    exit_status = 1
    when = (
        "what was asked could not be done (no such PID, no NVIDIA driver and nothing else to "
        "watch, no terminal for the screen, a capture that failed, a recording damaged inside, "
        "`replay --check` found a difference)"
    )


class BadUsage(GputopError):
    """The command line itself is wrong: said with the command's usage, before anything opens."""

    exit_status = 2
    with_usage = True
    when = (
        "a bad flag or value, or flags that contradict each other: said with the command's own "
        "usage, before anything opens"
    )


class BadInput(GputopError):
    """A file or address named on the command line cannot be used: the flags are fine, what
    they name is not (so no usage, which would not help)."""

    exit_status = 2
    when = (
        "a file or address given cannot be used (a recording that is not one, --record to a "
        "path that exists, a --prometheus port in use), said before anything opens"
    )


class CannotStart(GputopError):
    """The command gputop was to start cannot be started: 127, as a shell says it."""

    exit_status = 127
    when = "the command given to `gputop run` or `gputop diagnose --` cannot be started"


DONE = ("0", "done")
OTHER_STATUSES = (
    (
        "3",
        "`gputop watch` or `diagnose --exit-on`: a trigger it names fired (its captures written)",
    ),
    ("130", "`gputop capture` cancelled with ctrl+c (the manifest says what was kept)"),
    ("the job's", "`gputop run`: its job's exit status, as a shell says it (128 + N for signal N)"),
)
"""Statuses no error gives: the capture cancelled, and the job's own status."""


def status_classes() -> list[type[GputopError]]:
    """The classes every user-facing error derives from (this module's direct subclasses of
    GputopError), by exit status: the rows of the table."""
    own = [c for c in GputopError.__subclasses__() if c.__module__ == __name__]
    return sorted(own, key=lambda c: c.exit_status)


def exit_status_table() -> list[tuple[str, str]]:
    """(status, meaning) rows for the manual and README: what each exit status means."""
    rows = [(str(c.exit_status), c.when) for c in status_classes()]
    numbered = sorted([*rows, *(r for r in OTHER_STATUSES if r[0].isdigit())],
                      key=lambda r: int(r[0]))  # fmt: skip
    return [DONE, *numbered, *(r for r in OTHER_STATUSES if not r[0].isdigit())]
