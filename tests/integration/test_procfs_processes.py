"""The host source, the agent link and the stack sampler share one walk of /proc. It starts a
child process so that the walked tree holds a real process besides this one."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow


def test_one_walk_of_the_tree_serves_every_source():
    """The host source, the agent link and the stack sampler read one walk of /proc."""
    import subprocess
    import sys

    from gputop.commands.target import attach

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        attached = attach(os.getpid(), clock=lambda: 100.0)  # one tick, however slow
        host = attached.host
        assert host is not None
        for _ in range(3):
            host.sample()
            attached.agents.sample()
            pids = [pid for pid, _ in attached.stacks.tree()]
        assert child.pid in pids
        assert host.tree.walks == 1 and attached.stacks._tree is host.tree
    finally:
        child.kill()
        child.wait()
