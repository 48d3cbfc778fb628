"""gputop's subcommands, one module each (memray's ``commands`` layout).

Every module has ``NAME`` (the subcommand; None for the bare monitor), ``HELP`` and
``DESCRIPTION`` (its --help), ``add_arguments(parser)`` and ``run(args) -> exit code``. What
several share is beside them: ``flags`` (the flag groups), ``gpu_source``, ``target``,
``live_session`` and ``screen`` (what a command opens from its flags). A module imports only
the standard library, ``gputop.errors`` and those at its top: what it needs (Textual, NVML,
torch-free sources) it imports inside ``run``, so `gputop report` never pays for the screen
and headless commands never import Textual at all.

To add a subcommand: write its module, add it to ``SUBCOMMANDS`` in the order `gputop --help`
lists it, and test it through ``gputop.cli.main``.
"""

from __future__ import annotations

from gputop.commands import (
    capture,
    captures,
    compare,
    completion,
    demo,
    diagnose,
    docs,
    fleet,
    history,
    man,
    monitor,
    record,
    replay,
    report,
    run,
    schema,
    snapshot,
    watch,
)

MONITOR = monitor
"""What `gputop` with no subcommand runs; its flags are the top-level parser's."""
SUBCOMMANDS = (
    demo,
    diagnose,
    watch,
    record,
    replay,
    report,
    compare,
    history,
    run,
    snapshot,
    capture,
    captures,
    fleet,
    schema,
    docs,
    completion,
    man,
)
"""In the order `gputop --help` lists them."""

__all__ = ["MONITOR", "SUBCOMMANDS"]
