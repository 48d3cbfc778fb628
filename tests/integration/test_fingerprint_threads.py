"""The fingerprint's torch thread count is what the script set, whenever the agent first asked:
the agent thread used to keep the count from before the script's ``torch.set_num_threads`` (a
thread keeps the count it saw first), so the CPU lever said "torch threads 2" for a job running
4 (seen on CI, where the agent's first look came between ``import torch`` and the set)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # each test starts real processes

SCRIPT = r"""
import json, threading, torch
from gputop.agent import torch_hooks as th

default = torch.get_num_threads()
asked, go, seen = threading.Event(), threading.Event(), []
def agent_thread():
    seen.append(th.fingerprint()["intra_op_threads"])  # before the script sets its count
    asked.set(); go.wait()
    seen.append(th.fingerprint()["intra_op_threads"])
t = threading.Thread(target=agent_thread); t.start()
asked.wait()
torch.set_num_threads(default + 1)
go.set(); t.join()
print(json.dumps({"default": default, "seen": seen}))
"""


def test_the_thread_count_set_after_the_agent_first_asked_is_the_one_reported():
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout.splitlines()[-1])
    assert doc["seen"] == [doc["default"], doc["default"] + 1], doc
