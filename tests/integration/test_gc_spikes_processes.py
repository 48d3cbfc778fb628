"""The agent's garbage-collection callback in a real Python: a forked child (a DataLoader
worker) drops it while the parent keeps it, and GPUTOP_GC=0 leaves gc.callbacks alone. They
start a process so that the agent is initialised fresh, with the environment and the fork
it would see in a job."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


FORK = """
import gc, os
os.environ["GPUTOP_NO_SERVER"] = "1"
import gputop.agent as gt
gt.init(torch_hooks=False)
mine = gt._rec._gc_cb
assert mine in gc.callbacks
pid = os.fork()
if pid == 0:  # a DataLoader worker: no recording, no callback on its collections
    os._exit(0 if gt._rec._gc_cb is None and mine not in gc.callbacks else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), mine in gc.callbacks)
"""


def test_a_forked_child_drops_the_callback_and_the_parent_keeps_it():
    out = subprocess.run([sys.executable, "-c", FORK], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["0", "True"], out.stderr


def test_gputop_gc_0_leaves_gc_callbacks_alone():
    code = "import gc, gputop.agent as gt; gt.init(torch_hooks=False); print(len(gc.callbacks))"
    env = {**os.environ, "GPUTOP_NO_SERVER": "1", "GPUTOP_GC": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "0", out.stderr
