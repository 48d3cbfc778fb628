"""Config: defaults < file < flags; a bad file is reported, never fatal."""

from __future__ import annotations

import os
from pathlib import Path

from gputop.config import FILE_LIMIT, Config, load_config, with_flags


def test_missing_default_file_is_silent(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("GPUTOP_CONFIG", raising=False)
    assert load_config() == Config(snapshot_dir=Config().snapshot_dir)


def test_missing_explicit_file_is_reported(tmp_path):
    c = load_config(tmp_path / "nope.toml")
    assert len(c.problems) == 1 and "does not exist" in c.problems[0]


def test_values_are_read_and_checked(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text(
        'interval = 30\ncolor = "purple"\nmouse = "yes"\ntheme = "gputop-light"\n'
        'snapshot_dir = "~/snaps"\nwhat = 1\n[keys]\nquit = "x"\n'
    )
    c = load_config(f)
    assert c.interval == 10.0  # clamped
    assert c.color == "auto" and c.mouse is True  # bad values fall back to defaults
    assert c.theme == "gputop-light"
    assert c.snapshot_dir == Path("~/snaps").expanduser()
    assert dict(c.keys) == {"quit": "x"}
    text = "\n".join(c.problems)
    assert "clamped" in text and "purple" in text and "true or false" in text
    assert "unknown setting 'what'" in text
    assert all(p.startswith(str(f)) for p in c.problems)


def test_broken_toml_is_one_problem(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("interval = = 2")
    c = load_config(f)
    assert c.interval == Config().interval
    assert len(c.problems) == 1 and "not valid TOML" in c.problems[0]


def test_flags_override_the_file(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("interval = 3\n")
    c = with_flags(load_config(f), interval=1.0, color=None, mouse=False)
    assert (c.interval, c.color, c.mouse) == (1.0, "auto", False)


def test_low_bandwidth_preset():
    c = Config(low_bandwidth=True, interval=1.0).effective()
    assert (c.interval, c.color, c.mouse) == (5.0, "16", False)
    assert Config(low_bandwidth=True, color="mono").effective().color == "mono"
    assert Config().effective() == Config().effective()


def test_the_capture_folder_can_be_configured(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('capture_dir = "~/caps"\n')
    assert load_config(f).capture_dir == Path("~/caps").expanduser()
    f.write_text("capture_dir = 5\n")
    c = load_config(f)
    assert c.capture_dir is None and c.problems == (
        f"{f}: capture_dir must be a path, not 5; using $GPUTOP_CAPTURE_DIR or ./gputop-captures",
    )


def test_a_path_under_a_user_that_does_not_exist_is_one_line_not_a_crash(tmp_path):
    """Before: RuntimeError "Could not determine home directory" out of load_config."""
    f = tmp_path / "c.toml"
    f.write_text('snapshot_dir = "~nosuchuser-gputop/x"\nthemes_dir = "~nosuchuser-gputop"\n')
    c = load_config(f)
    assert c.snapshot_dir == Config().snapshot_dir
    assert c.themes_dir == Config().themes_dir
    assert c.problems == (
        f"{f}: snapshot_dir = '~nosuchuser-gputop/x': no home directory for nosuchuser-gputop;"
        " using the current directory",
        f"{f}: themes_dir = '~nosuchuser-gputop': no home directory for nosuchuser-gputop;"
        " using ~/.config/gputop/themes",
    )
    flagged = with_flags(Config(), capture_dir="~nosuchuser-gputop/caps")
    assert flagged.capture_dir is None and "no home directory" in flagged.problems[0]


def test_deep_nesting_is_one_line_not_a_crash(tmp_path):
    """Before: RecursionError out of tomllib, through load_config."""
    f = tmp_path / "c.toml"
    for text in ("x = " + "[" * 5000 + "]" * 5000, "x = " + "{a = " * 3000 + "1" + "}" * 3000):
        f.write_text(text)
        c = load_config(f)
        assert c.problems == (f"config file {f}: it is nested too deeply to read; using defaults",)
        assert c.interval == Config().interval


def test_a_fifo_a_directory_and_a_huge_file_are_one_line_each(tmp_path):
    """A FIFO would block the read until a writer came; /dev/zero would fill memory."""
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.toml"
    huge.write_text("# " + "x" * FILE_LIMIT + "\n")
    for path, words in [
        (fifo, "not a regular file"),
        (tmp_path, "not a regular file"),
        (Path("/dev/zero"), "not a regular file"),
        (huge, "larger than 1024 KiB"),
    ]:
        (line,) = load_config(path).problems
        assert words in line and line.endswith("; using defaults")
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    assert load_config(binary).problems == (
        f"config file {binary}: it is not UTF-8 text; using defaults",
    )


def test_each_bad_key_entry_is_one_line_and_the_good_ones_stay(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[keys]\nquit = 3\npause = "z"\nhelp = ["q"]\n')
    c = load_config(f)
    assert dict(c.keys) == {"pause": "z"} and c.file == f
    assert c.problems == (
        f'{f}: [keys] quit must be a string like "q" or "ctrl+q,x", not 3; keeping its default'
        " keys",
        f'{f}: [keys] help must be a string like "q" or "ctrl+q,x", not a list of 1; keeping'
        " its default keys",
    )
    f.write_text("keys = 5\n")
    assert load_config(f).problems == (
        f'{f}: keys must be a table of binding id = "key[,key...]", not 5; using the default keys',
    )


def test_many_unknown_settings_are_one_line_and_values_are_quoted_short(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("".join(f"u{i} = 1\n" for i in range(1000)) + f'color = "{"x" * 5000}"\n')
    c = load_config(f)
    assert len(c.problems) == 2
    assert "unknown settings 'u0', 'u1', 'u2', 'u3', 'u4' and 995 more (ignored)" in c.problems[1]
    assert len(c.problems[0]) < len(str(f)) + 160 and "..." in c.problems[0]
    f.write_text('theme = "a\\nb"\ninterval = "\\n"\n')
    assert all("\n" not in p for p in load_config(f).problems)
