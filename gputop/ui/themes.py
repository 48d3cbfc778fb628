"""Theme files (TOML, one per theme) -> Textual themes, with gputop's own variables.

File format::

    name = "gputop-dark"
    dark = true
    ansi = false            # true: use the terminal's 16-colour palette
    [textual]               # any colour field of textual.theme.Theme (primary is required)
    [variables]             # optional extra Textual variables
    [gputop]                # good, warn, bad, chart-sm, chart-power, chart-memory, chart-pcie

A file that cannot be read or lacks what a theme needs is reported once (one line) and skipped.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

from gputop.resources import bundled_themes_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

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
DEFAULT_THEME = "gputop-dark"
COLOR_FIELDS = {
    f.name
    for f in fields(Theme)
    if f.name not in ("name", "dark", "ansi", "variables", "luminosity_spread", "text_alpha")
}


class ThemeError(ValueError):
    """A theme file that cannot be used; the theme is skipped and the message shown as a problem."""


def _color(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ThemeError(f"{where} must be a colour string, not {value!r}")
    if not value.startswith("ansi_"):
        try:
            Color.parse(value)
        except ColorParseError:
            raise ThemeError(f"{where} = {value!r} is not a colour") from None
    return value


def theme_from_toml(text: str, source: str = "<theme>") -> Theme:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ThemeError(f"not valid TOML ({e})") from None
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ThemeError("has no name")
    colours = data.get("textual", {})
    if not isinstance(colours, dict) or "primary" not in colours:
        raise ThemeError("needs a [textual] table with at least primary")
    unknown = set(colours) - COLOR_FIELDS
    if unknown:
        raise ThemeError(f"unknown [textual] colours: {', '.join(sorted(unknown))}")
    kwargs = {k: _color(v, f"[textual] {k}") for k, v in colours.items()}
    variables = {
        k: _color(v, f"[variables] {k}") for k, v in dict(data.get("variables", {})).items()
    }
    ansi = bool(data.get("ansi", False))
    if ansi:  # Textual's own CSS reads these in ANSI themes
        variables.setdefault("ansi-background", "ansi_black")
        variables.setdefault("ansi-foreground", "ansi_white")
    ours = dict(data.get("gputop", {}))
    unknown = set(ours) - set(GPUTOP_VARIABLES)
    if unknown:
        raise ThemeError(f"unknown [gputop] variables: {', '.join(sorted(unknown))}")
    for k, fallback in GPUTOP_VARIABLES.items():
        variables[f"gputop-{k}"] = _color(ours.get(k, fallback), f"[gputop] {k}")
    return Theme(
        name=name,
        dark=bool(data.get("dark", True)),
        ansi=ansi,
        variables=variables,
        **kwargs,
    )


def load_themes(dirs: Iterable[Path]) -> tuple[list[Theme], list[str]]:
    """Every ``*.toml`` theme in ``dirs`` (later dirs override earlier names) and the problems."""
    found: dict[str, Theme] = {}
    problems: list[str] = []
    for d in dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            try:
                theme = theme_from_toml(path.read_text(), str(path))
            except (OSError, UnicodeDecodeError) as e:
                problems.append(f"theme {path}: cannot read it ({e}); skipped")
                continue
            except ThemeError as e:
                problems.append(f"theme {path}: {e}; skipped")
                continue
            found[theme.name] = theme
    return list(found.values()), problems


def all_theme_dirs(user_dir: Path) -> list[Path]:
    return [bundled_themes_dir(), user_dir]
