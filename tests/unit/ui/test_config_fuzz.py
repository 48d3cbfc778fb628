"""Fuzzing the config, key and theme loaders (issue 17: "a fuzz test of the config and theme
loaders, bounded in time"): valid TOML with wrong types and weird keys, deep nesting, random
text and bytes. Whatever the file holds, the loaders return something usable, never raise,
and each problem is one short line."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests_support import fuzz_examples

from gputop.config import COLOR_MODES, INTERVAL_MAX, INTERVAL_MIN, Config, load_config
from gputop.ui.app import GputopApp
from gputop.ui.keymap import QUIT_KEY, checked_keymap, parse_keys
from gputop.ui.themes import ThemeError, load_themes, theme_from_toml

FUZZ = settings(
    max_examples=fuzz_examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LINE_MAX = 400
"""Characters a problem line may have besides the file's name."""

SETTINGS = ["interval", "theme", "color", "mouse", "low_bandwidth", "snapshot_dir", "capture_dir"]
SETTINGS += ["themes_dir", "keys"]
THEME_KEYS = ["name", "dark", "ansi", "textual", "variables", "gputop", "primary", "secondary"]
THEME_KEYS += ["background", "good", "chart-sm", "warning"]
BINDING_IDS = [b.id for b in GputopApp.BINDINGS] + ["nope"]
KEY_WORDS = ["q", "ctrl", "shift", "alt", "meta", "+", ",", "escape", "f1", "?", "x", " ", "Q"]
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
WORDS = st.sampled_from(["~", "~nosuchuser/x", "/tmp", "", "ansi_red", "#123456", "red", "q"])
KEYS = st.lists(st.sampled_from(KEY_WORDS), max_size=8).map("".join)
NAMES = st.sampled_from(SETTINGS + THEME_KEYS + BINDING_IDS) | TEXT
SCALARS = st.booleans() | st.integers() | st.floats() | TEXT | WORDS | KEYS
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAMES, inner, max_size=4),
    max_leaves=20,
)
TABLES = st.dictionaries(NAMES, VALUES, max_size=8)


def toml_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return toml_string(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{toml_string(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml_doc(table: dict[str, Any]) -> str:
    """One ``key = value`` line per entry (tables inline)."""
    lines = [f"{toml_string(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def deep(depth: int, kind: str) -> str:
    if kind == "array":
        return "x = " + "[" * depth + "]" * depth + "\n"
    if kind == "table":
        return "x = " + "{a = " * depth + "1" + "}" * depth + "\n"
    return "".join(f"[{'.'.join(['t'] * (i + 1))}]\n" for i in range(min(depth, 300)))


DOCS = (
    TABLES.map(toml_doc)
    | st.text(max_size=300)
    | st.builds(deep, st.integers(1, 5000), st.sampled_from(["array", "table", "dotted"]))
)
FILES = DOCS.map(lambda s: s.encode("utf-8", "surrogatepass")) | st.binary(max_size=300)


def one_line_each(problems: Any, path: Path) -> None:
    for p in problems:
        assert isinstance(p, str) and "\n" not in p and "\r" not in p
        assert len(p.replace(str(path), "")) <= LINE_MAX, p


def usable_config(c: Config) -> None:
    assert INTERVAL_MIN <= c.interval <= INTERVAL_MAX
    assert c.color in COLOR_MODES and isinstance(c.theme, str) and c.theme
    assert isinstance(c.mouse, bool) and isinstance(c.low_bandwidth, bool)
    assert isinstance(c.snapshot_dir, Path) and isinstance(c.themes_dir, Path)
    assert c.capture_dir is None or isinstance(c.capture_dir, Path)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in c.keys.items())


def quit_still_works(keymap: dict[str, str]) -> None:
    """q quits; nothing else has it; every key given to Textual is one it can receive."""
    assert QUIT_KEY in parse_keys(keymap.get("quit", QUIT_KEY))
    for bid, keys in keymap.items():
        assert bid == "quit" or QUIT_KEY not in parse_keys(keys)


@FUZZ
@given(FILES)
def test_any_config_file_gives_a_usable_config_and_one_line_problems(raw):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.toml"
        path.write_bytes(raw)
        c = load_config(path)
    usable_config(c)
    usable_config(c.effective())
    one_line_each(c.problems, path)
    assert len(c.problems) <= len(SETTINGS) + 2
    keymap, problems = checked_keymap(c.keys, GputopApp.BINDINGS, str(path))
    quit_still_works(keymap)
    one_line_each(problems, path)


@FUZZ
@given(st.dictionaries(st.sampled_from(BINDING_IDS) | TEXT, KEYS | TEXT, max_size=12))
def test_any_keys_table_keeps_quit_and_gives_textual_only_keys_it_can_receive(wanted):
    keymap, problems = checked_keymap(wanted, GputopApp.BINDINGS, "c.toml")
    quit_still_works(keymap)
    one_line_each(problems, Path("c.toml"))
    assert len(problems) <= len(wanted)
    taken: dict[str, str] = {}
    for bid, keys in keymap.items():  # no two bindings share a key
        for key in parse_keys(keys):
            assert taken.setdefault(key, bid) == bid


def theme_doc(table: dict[str, Any], extra: str) -> str:
    return toml_doc(table) + extra


THEME_DOCS = (
    st.builds(
        theme_doc,
        st.fixed_dictionaries(
            {"name": TEXT | WORDS, "textual": st.dictionaries(st.sampled_from(THEME_KEYS), VALUES)}
        ),
        st.sampled_from(["", "[variables]\na = 1\n", "[gputop]\ngood = 'red'\n", "dark = 2\n"]),
    )
    | TABLES.map(toml_doc)
    | DOCS
)


@FUZZ
@given(THEME_DOCS)
def test_any_theme_text_is_a_theme_textual_can_use_or_one_line(text):
    try:
        theme = theme_from_toml(text)
    except ThemeError as e:
        one_line_each([str(e)], Path())
    else:
        theme.to_color_system().generate()  # what Textual does when it is chosen


@FUZZ
@given(st.lists(FILES, min_size=1, max_size=3))
def test_any_theme_files_load_without_raising(files):
    with tempfile.TemporaryDirectory() as d:
        for i, raw in enumerate(files):
            (Path(d) / f"t{i}.toml").write_bytes(raw)
        themes, problems, skipped = load_themes([Path(d)], chosen="t")
    assert len(problems) <= len(files) and len(themes) + len(problems) <= len(files)
    one_line_each(problems, Path(d))
    assert all(isinstance(name, str) for name in skipped)
