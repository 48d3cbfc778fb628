"""Config: defaults < file < flags; a bad file is reported, never fatal."""

from __future__ import annotations

from pathlib import Path

from gputop.config import Config, load_config, with_flags


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
    assert c.capture_dir is None and c.problems == (f"{f}: capture_dir must be a path, not 5",)
