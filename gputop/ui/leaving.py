"""SIGHUP (the terminal is gone) and SIGTERM while the screen is up: the app leaves through its
own exit, which restores the terminal, rather than dying with the terminal left in raw mode."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable

LEAVE_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
NO_HANDLERS = (NotImplementedError, RuntimeError, ValueError)
"""What a loop says where it cannot take signal handlers (not the main thread, no loop)."""


def catch_leave_signals(handler: Callable[[int], object]) -> None:
    """``handler(signal)`` on the running event loop for each of ``LEAVE_SIGNALS``."""
    with contextlib.suppress(*NO_HANDLERS):
        loop = asyncio.get_running_loop()
        for sig in LEAVE_SIGNALS:
            loop.add_signal_handler(sig, handler, sig)


def release_leave_signals() -> None:
    """The loop's handlers removed (the default, death, is back)."""
    with contextlib.suppress(*NO_HANDLERS):
        loop = asyncio.get_running_loop()
        for sig in LEAVE_SIGNALS:
            loop.remove_signal_handler(sig)
