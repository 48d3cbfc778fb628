"""Settings: built-in defaults < config file (~/.config/gputop/config.toml) < command-line flags.

A bad config file never stops gputop: each problem becomes one line in ``Config.problems``
(shown once at start: the file, the setting, what is wrong, what is used instead) and the bad
value is replaced by its default. Key strings are checked by the screen (``ui/keymap.py``),
which knows the bindings.

    # ~/.config/gputop/config.toml
    interval = 2.0          # seconds between screen updates (0.5 .. 10)
    theme = "gputop-dark"
    color = "auto"          # auto, truecolor, 256, 16, mono
    mouse = true
    low_bandwidth = false
    snapshot_dir = "~/gputop-snapshots"
    capture_dir = "~/gputop-captures"   # default: $GPUTOP_CAPTURE_DIR or ./gputop-captures
    history = true          # remember each job's runs to compare the next with (gputop history)
    arm = "hung,straggler"  # captures that take themselves (--arm): hung, straggler,
                            # regression, verdict, memory or "all"; default: none
    arm_budget_mb = 4096    # the capture root's size past which old armed captures go

    [keys]                  # binding id = "key[,key...]"  (ids are listed by the help screen)
    quit = "q"
    pause = "space,p"
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gputop.vocab.arm import parse_triggers

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

INTERVAL_MIN = 0.5
INTERVAL_MAX = 10.0
INTERVAL_STEPS = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
"""The refresh intervals the screen's keys step through (+ slower, - faster)."""
COLOR_MODES = ("auto", "truecolor", "256", "16", "mono")
LOW_BANDWIDTH_INTERVAL = 5.0
FILE_LIMIT = 1 << 20
"""Bytes read at most from a config or theme file (a FIFO or /dev/zero must not hang or fill
memory)."""
SHOWN = 60
"""Characters of a bad value quoted in a problem line."""


NO_HOME = Path("/nonexistent")
"""The home of a user with none: no $HOME and no passwd entry (a container's --user 12345)."""


def default_config_dir() -> Path:
    """``$XDG_CONFIG_HOME/gputop`` or ``~/.config/gputop``; a user without a home has no
    config file there, which is not an error."""
    base = os.environ.get("XDG_CONFIG_HOME")
    if not base:
        try:
            base = str(Path.home() / ".config")
        except RuntimeError:
            base = str(NO_HOME / ".config")
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
    history: bool = True
    """Remember each job's runs (``gputop/history``) and compare a run with the job's last."""
    arm: frozenset[str] = frozenset()
    """The triggers armed captures fire on (``gputop/arm``); empty: none unless ``--arm``."""
    arm_budget_mb: float = 4096.0
    """The capture root's size (MiB) past which the oldest armed captures are removed."""
    keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Binding id -> key string as written; checked against the bindings by the screen."""
    themes_dir: Path = field(default_factory=lambda: default_config_dir() / "themes")
    problems: tuple[str, ...] = ()
    """One line per problem found in the config file or flags (bad values were ignored)."""
    file: Path | None = None
    """The config file read, if any (the screen names it in key-binding problems)."""

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


def with_no_color(config: Config, environ: Mapping[str, str] = os.environ) -> Config:
    """``NO_COLOR`` set and not empty (no-color.org) means the mono colours, unless the config
    file or a flag chose colours (``auto`` chooses nothing: it asks the environment)."""
    if config.color == "auto" and environ.get("NO_COLOR"):
        return replace(config, color="mono")
    return config


def clamp_interval(value: float) -> float:
    return min(INTERVAL_MAX, max(INTERVAL_MIN, value))


def next_interval(interval: float, slower: bool) -> float:
    """The step after ``interval`` towards slower (or faster) refreshes; the bound past the
    last step."""
    if slower:
        return next((s for s in INTERVAL_STEPS if s > interval), INTERVAL_MAX)
    return next((s for s in reversed(INTERVAL_STEPS) if s < interval), INTERVAL_MIN)


def shown(value: object) -> str:
    """A value as a problem line quotes it: short, one line, never a nested structure's repr
    (which may be huge or too deep to print)."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def one_line(text: str) -> str:
    """Problem lines are one line each, whatever a parser's message or a file name holds."""
    return " ".join(text.split())


def read_small_text(path: Path, limit: int = FILE_LIMIT) -> str:
    """The text of a regular file of at most ``limit`` bytes. Raises OSError,
    UnicodeDecodeError, or ValueError (not a regular file, too large)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("it is not a regular file")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, 65536)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise ValueError(f"it is larger than {limit // 1024} KiB")
    return b"".join(chunks).decode()


def parse_toml(text: str) -> dict[str, Any]:
    """TOML text -> its table; ValueError with one line on any failure (deep nesting makes
    tomllib recurse until RecursionError)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"it is not valid TOML ({one_line(str(e))})") from None
    except RecursionError:
        raise ValueError("it is nested too deeply to read") from None


def read_toml(path: Path) -> dict[str, Any]:
    """A small TOML file's table; ValueError with one line (OSError for a missing file)."""
    try:
        text = read_small_text(path)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise ValueError(f"it cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None
    return parse_toml(text)


def _expanded(name: str, value: str, problems: list[str], instead: str) -> Path | None:
    """``~`` and ``~user`` expanded; a user that does not exist is a problem, not a crash."""
    if "\0" in value:
        problems.append(f"{name} = {shown(value)} holds a NUL byte; using {instead}")
        return None
    try:
        return Path(value).expanduser()
    except RuntimeError:  # ~nosuchuser, or ~ with no $HOME and no passwd entry
        user = value[1:].split("/", 1)[0] or "the current user"
        problems.append(f"{name} = {shown(value)}: no home directory for {user}; using {instead}")
        return None


DEFAULT_WORDS = {
    "interval": f"{Config.interval} s",
    "theme": Config.theme,
    "color": Config.color,
    "mouse": str(Config.mouse).lower(),
    "low_bandwidth": str(Config.low_bandwidth).lower(),
    "snapshot_dir": "the current directory",
    "capture_dir": "$GPUTOP_CAPTURE_DIR or ./gputop-captures",
    "themes_dir": "~/.config/gputop/themes",
    "history": str(Config.history).lower(),
    "arm": "nothing armed",
    "arm_budget_mb": f"{Config.arm_budget_mb:g} MiB",
}
"""What a bad setting falls back to, as its problem line says."""


def _keys(value: Any, problems: list[str]) -> Mapping[str, str] | None:
    """The [keys] table's string entries; others are reported one line each (the screen
    checks the key strings themselves)."""
    if not isinstance(value, dict):
        problems.append(
            f'keys must be a table of binding id = "key[,key...]", not {shown(value)}; '
            "using the default keys"
        )
        return None
    good = {}
    for bid, keys in value.items():
        if isinstance(keys, str):
            good[bid] = keys
        else:
            problems.append(
                f'[keys] {bid} must be a string like "q" or "ctrl+q,x", not {shown(keys)}; '
                "keeping its default keys"
            )
    return MappingProxyType(good)


def _arm(value: Any, problems: list[str], instead: str) -> frozenset[str] | None:
    """``arm = "hung,straggler"`` (or a list of names, or "all")."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = ",".join(value)
    if not isinstance(value, str):
        problems.append(f"arm must be a list of triggers, not {shown(value)}; using {instead}")
        return None
    try:
        return parse_triggers(value) if value.strip() else frozenset()
    except ValueError as e:
        problems.append(f"arm = {shown(value)}: {e}; using {instead}")
        return None


def _check(name: str, value: Any, problems: list[str]) -> Any:
    """The value if valid for ``name``, else None (with a problem recorded)."""
    instead = DEFAULT_WORDS.get(name, "")
    if name == "interval":
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            if not INTERVAL_MIN <= value <= INTERVAL_MAX:
                problems.append(
                    f"interval {shown(value)} is outside {INTERVAL_MIN}..{INTERVAL_MAX} s; clamped"
                )
            return clamp_interval(float(value))
        problems.append(
            f"interval must be a number of seconds, not {shown(value)}; using {instead}"
        )
    elif name == "color":
        if value in COLOR_MODES:
            return value
        problems.append(
            f"color must be one of {', '.join(COLOR_MODES)}, not {shown(value)}; using {instead}"
        )
    elif name in ("mouse", "low_bandwidth", "history"):
        if isinstance(value, bool):
            return value
        problems.append(f"{name} must be true or false, not {shown(value)}; using {instead}")
    elif name == "theme":
        if isinstance(value, str) and value:
            return value
        problems.append(f"theme must be a theme name, not {shown(value)}; using {instead}")
    elif name in ("snapshot_dir", "themes_dir", "capture_dir"):
        if isinstance(value, str) and value:
            return _expanded(name, value, problems, instead)
        problems.append(f"{name} must be a path, not {shown(value)}; using {instead}")
    elif name == "arm":
        return _arm(value, problems, instead)
    elif name == "arm_budget_mb":
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
        problems.append(f"arm_budget_mb must be a number of MiB above 0, not {shown(value)}; "
                        f"using {instead}")  # fmt: skip
    elif name == "keys":
        return _keys(value, problems)
    else:
        problems.append(f"unknown setting {shown(name)} (ignored)")
    return None


def _unknown_in_one_line(problems: list[str]) -> list[str]:
    """Unknown settings as one line, however many a file has."""
    unknown = [p for p in problems if p.startswith("unknown setting ")]
    if len(unknown) <= 1:
        return problems
    names = [p.removeprefix("unknown setting ").removesuffix(" (ignored)") for p in unknown]
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    line = f"unknown settings {', '.join(names[:5])}{more} (ignored)"
    return [p for p in problems if p not in unknown] + [line]


def load_config(path: Path | None = None) -> Config:
    """Read the config file (default location when ``path`` is None); never raises."""
    explicit = path is not None
    path = path or Path(os.environ.get("GPUTOP_CONFIG", default_config_dir() / "config.toml"))
    try:
        data = read_toml(path)
    except FileNotFoundError:
        if explicit:
            return Config(
                problems=(one_line(f"config file {path} does not exist; using defaults"),)
            )
        return Config()
    except (OSError, ValueError) as e:
        return Config(problems=(one_line(f"config file {path}: {e}; using defaults"),))
    problems: list[str] = []
    values = {}
    for name, value in data.items():
        checked = _check(name, value, problems)
        if checked is not None:
            values[name] = checked
    problems = _unknown_in_one_line(problems)
    return Config(**values, file=path, problems=tuple(one_line(f"{path}: {p}") for p in problems))


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
