"""Theme files (TOML, one per theme) -> Textual themes, with gputop's own variables.

File format::

    name = "gputop-dark"
    dark = true
    ansi = false            # true: use the terminal's 16-colour palette
    [textual]               # any colour field of textual.theme.Theme (primary is required)
    [variables]             # optional extra Textual variables
    [gputop]                # good, warn, bad, chart-sm, chart-power, chart-memory, chart-pcie

A file that cannot be read, is not such a table, or has any bad value is reported once (one
line: the file, what is wrong, that it was skipped) and skipped; a theme is one unit, half of one
would look broken. Nothing in a theme file can stop gputop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

from gputop.config import Config, one_line, parse_toml, read_toml, shown
from gputop.resources import bundled_themes_dir

GPUTOP_VARIABLES = {
    "good": "green",
    "warn": "yellow",
    "bad": "red",
    "chart-sm": "dodgerblue",
    "chart-power": "orange",
    "chart-memory": "violet",
    "chart-pcie": "cyan",
}
"""gputop's theme variables (``$gputop-good`` in CSS) and their fallbacks."""
DEFAULT_THEME = Config.theme
"""The config's default theme (``Config.theme``): the one name it has."""
MONO_THEME = "gputop-mono"
"""Black and white: --color mono (or NO_COLOR) chooses it unless a theme was named."""
FALLBACK_THEME = "textual-dark"
"""Textual's own, where not even gputop's default theme could be read."""
THEME_NAME = re.compile(r"[\w.+-][\w .+-]{0,63}")
VARIABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
"""What a Textual CSS variable may be called ($name)."""
COLOR_FIELDS = {
    f.name
    for f in fields(Theme)
    if f.name not in ("name", "dark", "ansi", "variables", "luminosity_spread", "text_alpha")
}


class ThemeError(ValueError):
    """A theme file that cannot be used; the theme is skipped and the message shown as a problem."""


def _color(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ThemeError(f"{where} must be a colour string, not {shown(value)}")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ThemeError(f"{where} = {shown(value)} is not a colour") from None
    return value


def _table(data: dict, name: str) -> dict:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ThemeError(f"[{name}] must be a table, not {shown(value)}")
    return value


def _flag(data: dict, name: str, default: bool) -> bool:
    value = data.get(name, default)
    if not isinstance(value, bool):
        raise ThemeError(f"{name} must be true or false, not {shown(value)}")
    return value


def _unknown(names: Iterable[str], where: str) -> None:
    unknown = sorted(names)
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise ThemeError(f"unknown {where}: {', '.join(map(shown, unknown[:5]))}{more}")


def _variables(data: dict) -> dict[str, str]:
    table = _table(data, "variables")
    _unknown((k for k in table if not VARIABLE_NAME.fullmatch(k)), "[variables] names")
    return {k: _color(v, f"[variables] {k}") for k, v in table.items()}


def theme_from_toml(text: str, source: str = "<theme>") -> Theme:
    """A theme file's text -> a Textual theme; ThemeError (one line) for anything wrong."""
    try:
        data = parse_toml(text)
    except ValueError as e:
        raise ThemeError(str(e).removeprefix("it is ")) from None
    return theme_from_table(data)


def theme_from_table(data: dict) -> Theme:
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ThemeError("has no name")
    if not THEME_NAME.fullmatch(name):
        raise ThemeError(f"name {shown(name)} is not a theme name (letters, digits, .+- space)")
    colours = _table(data, "textual")
    if "primary" not in colours:
        raise ThemeError("needs a [textual] table with at least primary")
    _unknown(set(colours) - COLOR_FIELDS, "[textual] colours")
    kwargs: dict[str, Any] = {k: _color(v, f"[textual] {k}") for k, v in colours.items()}
    variables = _variables(data)
    ansi = _flag(data, "ansi", False)
    if ansi:  # Textual's own CSS reads these in ANSI themes
        variables.setdefault("ansi-background", "ansi_black")
        variables.setdefault("ansi-foreground", "ansi_white")
    ours = _table(data, "gputop")
    _unknown(set(ours) - set(GPUTOP_VARIABLES), "[gputop] variables")
    for k, fallback in GPUTOP_VARIABLES.items():
        variables[f"gputop-{k}"] = _color(ours.get(k, fallback), f"[gputop] {k}")
    theme = Theme(
        name=name, dark=_flag(data, "dark", True), ansi=ansi, variables=variables, **kwargs
    )
    try:  # what Textual does when the theme is chosen: fail here, not on the screen
        theme.to_color_system().generate()
    except Exception as e:  # any failure of Textual's on these values means: not usable
        raise ThemeError(f"Textual cannot use its colours ({one_line(str(e))[:80]})") from None
    return theme


def load_themes(
    dirs: Iterable[Path], chosen: str | None = None
) -> tuple[list[Theme], list[str], set[str]]:
    """Every ``*.toml`` theme in ``dirs`` (later dirs override earlier names), one problem line
    per file that was skipped, and the names of the skipped themes (when they had one).
    ``chosen``: the theme the config asks for; its line says what is used instead."""
    found: dict[str, Theme] = {}
    problems: list[str] = []
    skipped: set[str] = set()
    for d in dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            theme, problem, name = _load_one(path)
            if theme is not None:
                found[theme.name] = theme
                continue
            if name:
                skipped.add(name)
            instead = f"; using {DEFAULT_THEME}" if name and name == chosen else ""
            problems.append(one_line(f"theme file {path}: {problem}; skipped{instead}"))
    for name in found:
        skipped.discard(name)
    return list(found.values()), problems, skipped


def _load_one(path: Path) -> tuple[Theme | None, str, str | None]:
    """(the theme, "", name) or (None, what is wrong, its name if it had one)."""
    try:
        data = read_toml(path)
    except FileNotFoundError:  # a dangling link, or gone since the listing
        return None, "it does not exist (a broken link?)", None
    except (OSError, ValueError) as e:  # unreadable, not a file, too large, not TOML
        return None, str(e), None
    name = data.get("name")
    try:
        return theme_from_table(data), "", name if isinstance(name, str) else None
    except ThemeError as e:
        return None, str(e), name if isinstance(name, str) else None


def all_theme_dirs(user_dir: Path) -> list[Path]:
    return [bundled_themes_dir(), user_dir]


@dataclass(frozen=True)
class ThemeChoice:
    """What a screen starts with: gputop's themes (to register with Textual beside its own),
    the one to show, and one line per problem (a file skipped, a theme not found)."""

    themes: tuple[Theme, ...]
    name: str
    problems: tuple[str, ...]


def choose_theme(config: Config) -> ThemeChoice:
    """The config's theme from gputop's theme folders or Textual's own themes (mono colours
    mean the mono theme unless one was named); gputop's default where it is not found."""
    wanted = config.theme
    if config.color == "mono" and wanted == DEFAULT_THEME:
        wanted = MONO_THEME
    themes, problems, skipped = load_themes(all_theme_dirs(config.themes_dir), chosen=wanted)
    available = {*BUILTIN_THEMES, *(t.name for t in themes)}
    if wanted not in available:
        if wanted not in skipped:  # a skipped file's line already says so
            problems.append(f"theme {shown(wanted)} not found; using {DEFAULT_THEME}")
        wanted = DEFAULT_THEME if DEFAULT_THEME in available else FALLBACK_THEME
    return ThemeChoice(tuple(themes), wanted, tuple(problems))


def next_theme(names: Sequence[str], current: str) -> str:
    """The theme after ``current`` among ``names`` (gputop's own), round; the first of them
    from any other."""
    names = names or [DEFAULT_THEME]
    at = names.index(current) if current in names else -1
    return names[(at + 1) % len(names)]
