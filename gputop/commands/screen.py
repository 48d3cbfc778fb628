"""The live screen of the screen modes: its config from the flags, the terminal it needs, the
theme checked before anything opens, and starting it over a session.

Nothing here imports Textual at module level: the colour system must be chosen (environment
variables) before Textual is imported, and headless commands never import it at all.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gputop.commands.flags import UsageError
from gputop.commands.live_session import close_session
from gputop.errors import CannotDo

if TYPE_CHECKING:  # imported where they are used: the command decides what it loads
    from gputop.arm.armed import Armed
    from gputop.commands.gpu_source import Gpus
    from gputop.commands.target import Attached
    from gputop.config import Config
    from gputop.run import Job
    from gputop.session import Session


def ui_config(args: argparse.Namespace, terminal: bool = True) -> Config:
    from gputop.config import load_config, with_flags, with_no_color

    config = with_no_color(
        with_flags(
            load_config(args.config),
            interval=args.interval,
            color=args.color,
            theme=args.theme,
            mouse=args.mouse,
            low_bandwidth=args.low_bandwidth,
        )
    ).effective()
    if getattr(args, "theme", None):  # asked for on the command line: known before anything opens
        check_theme(config)
    if terminal:
        require_terminal()
    return config


def require_terminal() -> None:
    """NoTerminal unless stdin and stdout are a terminal: the screen modes check before they
    start anything (a job, a recording)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise NoTerminal(
            "the live screen needs a terminal (stdin and stdout are not one here): use "
            "`gputop diagnose`, `gputop record`, `gputop snapshot`, or `gputop run --no-tui`"
        )


class NoTerminal(CannotDo):
    """A screen mode started without a terminal (a pipe, /dev/null, cron): one line, exit 1.
    Textual would start anyway and busy-poll its input thread long after the job ended."""

    when = "a screen mode started where stdin or stdout is not a terminal"


def check_theme(config: Config) -> None:
    """UsageError (exit 2, with the valid names) for a --theme no folder or Textual has. Sets
    the terminal's colour environment first: Textual reads it once, when it is imported."""
    from gputop.ui.terminal import apply_terminal_env

    apply_terminal_env(config.color, config.low_bandwidth)
    from textual.theme import BUILTIN_THEMES

    from gputop.ui.themes import all_theme_dirs, load_themes

    ours = [t.name for t in load_themes(all_theme_dirs(config.themes_dir))[0]]
    if config.theme in ours or config.theme in BUILTIN_THEMES:
        return
    raise UsageError(
        f"--theme {config.theme}: no such theme; gputop's: {', '.join(ours)}; Textual's: "
        f"{', '.join(sorted(BUILTIN_THEMES))}"
    )


def run_tui(
    gpus: Gpus,
    config: Config,
    session: Session,
    attached: Attached,
    job: Job | None = None,
    attach_now: bool = False,
    armed: Armed | None = None,
) -> int:
    """The live screen over ``session``. Imports Textual only now: its colour system must come
    from the environment first."""
    from gputop.ui.terminal import apply_terminal_env

    apply_terminal_env(config.color, config.low_bandwidth)
    from gputop.ui.app import GputopApp, Target

    target = None
    if attached.host is not None:
        target = Target(pid=attached.host.pid, command=attached.command() or "?")
    extra = (f"no GPU data: {gpus.missing}",) if gpus.missing else ()
    offer = None
    if target is not None and job is None:
        from gputop.ui.screens.load_agent import AgentOffer

        offer = AgentOffer(target.pid, now=attach_now, identity=attached.identity)
    app = GputopApp(
        gpus.source,
        config=config,
        simulated=gpus.simulated,
        host=attached.host,
        target=target,
        agents=attached.agents,
        job=job,
        stacks=attached.stacks,
        extra_problems=extra,
        session=session,
        offer=offer,
        armed=armed,
    )
    session.start(
        {"simulated": gpus.simulated, "interval": app.interval,
         "pid": target.pid if target else None, "command": target.command if target else None}
    )  # fmt: skip
    try:
        app.run(mouse=config.mouse)
    finally:
        gpus.close()
        close_session(session)
    return app.return_code or 0
