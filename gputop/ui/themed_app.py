"""What every gputop screen (the monitor, replay, fleet) sets up alike: gputop's stylesheet, its
themes with the config's choice among them (``ui/themes.py``), and no command palette (each
screen draws its own key bar, ``ui/keybar.py``, and a palette key would be one it never shows).
The terminal's colour system is set before Textual is imported (``ui/terminal.py``)."""

from __future__ import annotations

from typing import TypeVar

from textual.app import App

from gputop.config import Config
from gputop.ui.themes import GPUTOP_VARIABLES, choose_theme

Result = TypeVar("Result")


class ThemedApp(App[Result]):
    """An app drawn with gputop's stylesheet in the theme ``config`` chooses."""

    CSS_PATH = "gputop.tcss"
    ENABLE_COMMAND_PALETTE = False

    def __init__(self, config: Config) -> None:
        super().__init__()
        choice = choose_theme(config)
        for theme in choice.themes:
            self.register_theme(theme)
        self.theme = choice.name
        self.gputop_themes = [t.name for t in choice.themes]
        """gputop's own themes, those key t goes through."""
        self.theme_problems = list(choice.problems)
        """For the status line: theme files skipped, a theme not found."""

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """gputop's variables for any theme that lacks them (Textual's own)."""
        return {f"gputop-{k}": v for k, v in GPUTOP_VARIABLES.items()}
