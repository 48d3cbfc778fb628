"""Terminal settings that must be in the environment before Textual is imported.

Textual reads TEXTUAL_COLOR_SYSTEM (and TEXTUAL_ANIMATIONS) when it is imported, so the CLI
calls ``apply_terminal_env`` first and imports the app afterwards.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

COLOR_SYSTEMS = {"truecolor": "truecolor", "256": "256", "16": "standard", "mono": "standard"}


def terminal_env(color: str, low_bandwidth: bool) -> dict[str, str]:
    env = {}
    if color in COLOR_SYSTEMS:
        env["TEXTUAL_COLOR_SYSTEM"] = COLOR_SYSTEMS[color]
    if low_bandwidth:
        env["TEXTUAL_ANIMATIONS"] = "none"
    return env


def apply_terminal_env(
    color: str, low_bandwidth: bool, environ: MutableMapping[str, str] = os.environ
) -> None:
    environ.update(terminal_env(color, low_bandwidth))
