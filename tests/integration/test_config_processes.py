"""A user with no home directory and no passwd entry still gets the default config. It forks a
child process, because only a separate process can become that user."""

from __future__ import annotations

import os

import pytest

from gputop.config import load_config

pytestmark = pytest.mark.slow


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming a user with no passwd entry needs root")
def test_a_user_without_a_home_gets_the_defaults(tmp_path):
    """No $HOME and no passwd entry (docker --user 54321): Path.home() raises; before, so did
    load_config() and Config()."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # forked, not exec'd: the interpreter may not be readable by that user
        try:
            for name in ("HOME", "XDG_CONFIG_HOME", "GPUTOP_CONFIG"):
                os.environ.pop(name, None)
            os.setgroups([])
            os.setgid(54321)
            os.setuid(54321)
            c = load_config()
            os.write(write, f"{c.problems} {c.themes_dir}".encode())
        except BaseException as e:
            os.write(write, f"{type(e).__name__}: {e}".encode())
        finally:
            os._exit(0)
    os.close(write)
    out = os.read(read, 65536).decode()
    os.waitpid(child, 0)
    os.close(read)
    assert out == "() /nonexistent/.config/gputop/themes"
