"""Theme files: anything wrong in one is one line naming the file, and the theme is skipped;
nothing in a theme file raises (issue 17 item 11). Parts of a good theme: test_ui_text.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputop.config import FILE_LIMIT
from gputop.ui.themes import DEFAULT_THEME, ThemeError, load_themes, theme_from_toml

GOOD = 'name = "mine"\n[textual]\nprimary = "#123456"\n'


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('name = "x"\nvariables = 3\n[textual]\nprimary = "red"', "[variables] must be a table"),
        ('name = "x"\ngputop = 3\n[textual]\nprimary = "red"', "[gputop] must be a table"),
        ('name = "x"\ngputop = [1]\n[textual]\nprimary = "red"', "[gputop] must be a table"),
        ('name = "x"\ntextual = "red"', "[textual] must be a table"),
        ('name = "x"\nansi = "no"\n[textual]\nprimary = "red"', "ansi must be true or false"),
        ('name = "x"\ndark = 1\n[textual]\nprimary = "red"', "dark must be true or false"),
        ('name = "x"\n[textual]\nprimary = "ansi_nonsense"', "is not a colour"),
        ('name = "x"\n[textual]\nprimary = "red"\n[variables]\n"a b" = "red"', "[variables] names"),
        ('name = "a\\nb"\n[textual]\nprimary = "red"', "is not a theme name"),
        ("x = " + "[" * 3000 + "]" * 3000, "nested too deeply"),
    ],
    ids=lambda v: v[:30] if isinstance(v, str) else None,
)
def test_a_bad_part_is_one_line_not_a_crash(text, words):
    """Before: TypeError (variables = 3, gputop = 3), ValueError (gputop = [1]), RecursionError
    (deep nesting) out of the loader, and ansi = "no" read as true."""
    with pytest.raises(ThemeError) as e:
        theme_from_toml(text)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_bundled_themes_still_load():
    themes, problems, skipped = load_themes([Path(__file__).parents[3] / "themes"])
    assert problems == [] and skipped == set()
    assert {"gputop-dark", "gputop-light", "gputop-mono", "gputop-ansi"} <= {t.name for t in themes}


def test_files_that_are_not_small_regular_text_are_one_line_each(tmp_path):
    (tmp_path / "good.toml").write_text(GOOD)
    os.mkfifo(tmp_path / "fifo.toml")  # reading it would wait forever for a writer
    (tmp_path / "dir.toml").mkdir()
    (tmp_path / "huge.toml").write_text("#" * (FILE_LIMIT + 1))
    (tmp_path / "bytes.toml").write_bytes(b"\xff\xfe")
    (tmp_path / "dangling.toml").symlink_to(tmp_path / "nowhere")
    themes, problems, _ = load_themes([tmp_path])
    assert [t.name for t in themes] == ["mine"]
    assert sorted(problems) == sorted(
        f"theme file {tmp_path / name}: {words}; skipped"
        for name, words in [
            ("fifo.toml", "it is not a regular file"),
            ("dir.toml", "it is not a regular file"),
            ("huge.toml", "it is larger than 1024 KiB"),
            ("bytes.toml", "it is not UTF-8 text"),
            ("dangling.toml", "it does not exist (a broken link?)"),
        ]
    )


def test_the_chosen_theme_skipped_says_what_is_used_instead(tmp_path):
    (tmp_path / "mine.toml").write_text('name = "mine"\nvariables = 3\n[textual]\nprimary = "red"')
    themes, problems, skipped = load_themes([tmp_path], chosen="mine")
    assert themes == [] and skipped == {"mine"}
    assert problems == [
        f"theme file {tmp_path / 'mine.toml'}: [variables] must be a table, not 3; skipped;"
        f" using {DEFAULT_THEME}"
    ]
