"""Settings: built-in defaults < config file (~/.config/gputop/config.toml) < command-line flags.

A bad config file never stops gputop: each problem becomes one line in ``Config.problems``
(shown once at start) and the bad value is replaced by its default.

    # ~/.config/gputop/config.toml
    interval = 2.0          # seconds between screen updates (0.5 .. 10)
    theme = "gputop-dark"
    color = "auto"          # auto, truecolor, 256, 16, mono
    mouse = true
    low_bandwidth = false
    snapshot_dir = "~/gputop-snapshots"
    capture_dir = "~/gputop-captures"   # default: $GPUTOP_CAPTURE_DIR or ./gputop-captures

    [keys]                  # binding id = "key[,key...]"  (ids are listed by the help screen)
    quit = "q"
    pause = "space,p"
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

INTERVAL_MIN = 0.5
INTERVAL_MAX = 10.0
COLOR_MODES = ("auto", "truecolor", "256", "16", "mono")
LOW_BANDWIDTH_INTERVAL = 5.0


def default_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gputop"


@dataclass(frozen=True)
class Config:
    """Every setting, checked: a bad value from the file or the flags is its default here, with a
    line in ``problems``."""

    interval: float = 2.0
    theme: str = "gputop-dark"
    color: str = "auto"
    mouse: bool = True
    low_bandwidth: bool = False
    snapshot_dir: Path = field(default_factory=Path.cwd)
    capture_dir: Path | None = None
    """Where capture folders go; None: $GPUTOP_CAPTURE_DIR or ./gputop-captures."""
    keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    themes_dir: Path = field(default_factory=lambda: default_config_dir() / "themes")
    problems: tuple[str, ...] = ()
    """One line per problem found in the config file or flags (bad values were ignored)."""

    def effective(self) -> Config:
        """Apply the low-bandwidth preset on top of whatever was not chosen explicitly."""
        if not self.low_bandwidth:
            return self
        return replace(
            self,
            interval=max(self.interval, LOW_BANDWIDTH_INTERVAL),
            color="16" if self.color in ("auto", "truecolor", "256") else self.color,
            mouse=False,
        )


def clamp_interval(value: float) -> float:
    return min(INTERVAL_MAX, max(INTERVAL_MIN, value))


def _check(name: str, value: Any, problems: list[str]) -> Any:
    """The value if valid for ``name``, else None (with a problem recorded)."""
    if name == "interval":
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            if not INTERVAL_MIN <= value <= INTERVAL_MAX:
                problems.append(
                    f"interval {value} is outside {INTERVAL_MIN}..{INTERVAL_MAX} s; clamped"
                )
            return clamp_interval(float(value))
        problems.append(f"interval must be a number of seconds, not {value!r}")
    elif name == "color":
        if value in COLOR_MODES:
            return value
        problems.append(f"color must be one of {', '.join(COLOR_MODES)}, not {value!r}")
    elif name in ("mouse", "low_bandwidth"):
        if isinstance(value, bool):
            return value
        problems.append(f"{name} must be true or false, not {value!r}")
    elif name == "theme":
        if isinstance(value, str) and value:
            return value
        problems.append(f"theme must be a theme name, not {value!r}")
    elif name in ("snapshot_dir", "themes_dir", "capture_dir"):
        if isinstance(value, str) and value:
            return Path(value).expanduser()
        problems.append(f"{name} must be a path, not {value!r}")
    elif name == "keys":
        if isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()
        ):
            return MappingProxyType(dict(value))
        problems.append('keys must be a table of binding id = "key[,key...]"')
    else:
        problems.append(f"unknown setting {name!r} (ignored)")
    return None


def load_config(path: Path | None = None) -> Config:
    """Read the config file (default location when ``path`` is None); never raises."""
    explicit = path is not None
    path = path or Path(os.environ.get("GPUTOP_CONFIG", default_config_dir() / "config.toml"))
    problems: list[str] = []
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        if explicit:
            problems.append(f"config file {path} does not exist; using defaults")
        return Config(problems=tuple(problems))
    except (OSError, UnicodeDecodeError) as e:
        return Config(problems=(f"cannot read config file {path}: {e}; using defaults",))
    except tomllib.TOMLDecodeError as e:
        return Config(problems=(f"config file {path} is not valid TOML ({e}); using defaults",))
    values = {}
    for name, value in data.items():
        checked = _check(name, value, problems)
        if checked is not None:
            values[name] = checked
    return Config(**values, problems=tuple(f"{path}: {p}" for p in problems))


def with_flags(config: Config, **flags: Any) -> Config:
    """Flags given on the command line (None means "not given") override the file."""
    problems = list(config.problems)
    values = {}
    for name, value in flags.items():
        if value is None:
            continue
        checked = _check(name, value, problems)
        if checked is not None:
            values[name] = checked
    return replace(config, **values, problems=tuple(problems))
