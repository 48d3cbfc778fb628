import sys

import pytest

from gputop.resources import bundled_themes_dir


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is 3.11+")
def test_the_default_theme_ships_and_parses():
    import tomllib

    path = bundled_themes_dir() / "gputop-dark.toml"
    theme = tomllib.loads(path.read_text())
    assert theme["name"] == "gputop-dark"
    assert {"good", "warn", "bad"} <= set(theme["gputop"])
    assert theme["textual"]["primary"].startswith("#")
