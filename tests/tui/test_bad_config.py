"""A bad config or theme file never stops the screen and never takes quitting away: each
problem is one line in the status line, shown once, and q still quits (issue 17 item 11).

Before: `~nosuchuser` paths and deep TOML nesting crashed at start, a theme whose variables
is a number crashed, and `quit = "ctrl+ctrl+alt+q"`, `help = "q"`, `quit = ""` left a screen
that q no longer quit."""

from __future__ import annotations

import pytest

from gputop.config import load_config
from gputop.ui.screens.help import HelpScreen
from gputop.ui.widgets import StatusLine


def status(app) -> str:
    return str(app.query_one(StatusLine).render())


async def quits_with_q(app, *before: str) -> None:
    async with app.run_test() as pilot:
        await pilot.pause()
        for key in before:
            await pilot.press(key)
        await pilot.press("q")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
    assert not app.is_running and app.return_code == 0


@pytest.mark.parametrize(
    ("keys", "words"),
    [
        ('quit = "ctrl+ctrl+alt+q"', "ctrl is given twice; keeping q"),
        ('help = "q"', "q is already quit's key; keeping question_mark,f1"),
        ('quit = ""', "no key given; keeping q"),
        ('quit = "w"\ncancel_capture = "q"', "q is already quit's key; keeping x"),
        ("quit = 7", "keeping its default keys"),
    ],
)
async def test_bad_key_bindings_are_one_line_each_and_q_still_quits(
    make_app, tmp_path, keys, words
):
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"snapshot_dir = {str(tmp_path)!r}\n[keys]\n{keys}\n")
    app = make_app(config=load_config(cfg))
    async with app.run_test() as pilot:
        await pilot.pause()
        assert status(app).count(words) == 1
        assert status(app).count(str(cfg)) == 1  # the one line names the file
    await quits_with_q(make_app(config=load_config(cfg)))


async def test_a_refused_key_keeps_its_default_working(make_app, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[keys]\nhelp = "q"\npause = "ctrl+ctrl+z"\n')
    app = make_app(config=load_config(cfg))
    async with app.run_test() as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "p")
        await pilot.pause()
        assert app.paused


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('snapshot_dir = "~nosuchuser-gputop/x"', "no home directory for nosuchuser-gputop"),
        ("x = " + "[" * 3000 + "]" * 3000, "nested too deeply to read; using defaults"),
        ("= = =", "not valid TOML"),
    ],
    ids=["no-such-user", "deep-nesting", "not-toml"],
)
async def test_a_config_file_that_crashed_at_start_is_one_line(make_app, tmp_path, text, words):
    cfg = tmp_path / "config.toml"
    cfg.write_text(text + "\n")
    app = make_app(config=load_config(cfg))
    async with app.run_test() as pilot:
        await pilot.pause()
        assert status(app).count(words) == 1 and len(status(app).splitlines()) == 1
    await quits_with_q(make_app(config=load_config(cfg)))


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("variables = 3\n", "[variables] must be a table, not 3"),
        ("gputop = [1]\n", "[gputop] must be a table, not a list of 1"),
        ('ansi = "no"\n', "ansi must be true or false, not 'no'"),
    ],
)
async def test_a_theme_that_crashed_at_start_is_one_line_and_the_default_is_used(
    make_app, tmp_path, extra, words
):
    themes = tmp_path / "themes"
    themes.mkdir()
    (themes / "mine.toml").write_text(f'name = "mine"\n{extra}[textual]\nprimary = "#123456"\n')
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'theme = "mine"\nthemes_dir = {str(themes)!r}\n')
    app = make_app(config=load_config(cfg))
    async with app.run_test() as pilot:
        await pilot.pause()
        (line,) = status(app).splitlines()
        assert line == f"theme file {themes / 'mine.toml'}: {words}; skipped; using gputop-dark"
        assert app.theme == "gputop-dark"
    await quits_with_q(make_app(config=load_config(cfg)))


async def test_brackets_in_a_problem_are_shown_as_written_not_read_as_markup(make_app, tmp_path):
    """The status line read its lines as Textual markup: "[variables]" vanished from a theme's
    line, and a value such as "[/x]" in the file could break the screen."""
    cfg = tmp_path / "config.toml"
    cfg.write_text('color = "[/x]"\ntheme = "[b]bold"\n[keys]\npause = "[/x]"\n')
    app = make_app(config=load_config(cfg))
    async with app.run_test() as pilot:
        await pilot.pause()
        text = status(app)
        assert "not '[/x]'; using auto" in text
        assert "pause = '[/x]': '[/x]' is not a key name" in text
        assert "theme '[b]bold' not found" in text
    await quits_with_q(make_app(config=load_config(cfg)))
