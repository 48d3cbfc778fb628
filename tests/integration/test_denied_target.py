"""Attached as a user that may not read the target (ptrace denied, /proc files closed): the
diagnosis says what could not be read and never concludes from what is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tests_support import as_nobody

# imported here: the child that becomes nobody may not read the interpreter's files
import gputop.headless as headless
import gputop.inject
import gputop.sources.agent_link  # noqa: F401
import gputop.sources.feeds as feeds
import gputop.sources.stacks as stacks
from gputop.commands.gpu_source import Board, open_gpus
from gputop.commands.live_session import new_session
from gputop.commands.target import attach, offer_agent

ASLEEP = "import time\nprint('up', flush=True)\nwhile True: time.sleep(0.5)"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become a second user (nobody)")
@pytest.mark.skipif(stacks.find_py_spy() is None, reason="py-spy is not installed")
def test_a_target_gputop_may_not_read_is_not_called_idle():
    # root's, asleep: idle or hung?
    target = subprocess.Popen([sys.executable, "-c", ASLEEP], stdout=subprocess.PIPE, text=True)
    assert target.stdout is not None and target.stdout.readline() == "up\n"  # it runs

    def diagnose_as_nobody() -> str:
        lines: list[str] = []
        attached = attach(target.pid)
        offer_agent(attached, load=False, say=lines.append)
        gpus = open_gpus(Board("h100"))
        session = new_session(gpus)
        session.start({"pid": target.pid})
        sources = feeds.feeds(gpus.source, attached.host, attached.agents, attached.stacks, 0.5)
        d = headless.diagnose(session, sources, duration=4.0)
        gpus.close()
        doc = headless.document(d, {"simulated": "h100", "pid": target.pid})
        return json.dumps({"doc": doc, "said": lines})

    try:
        raw = as_nobody(diagnose_as_nobody)
    finally:
        target.kill()
        target.wait()
    try:
        out = json.loads(raw)
    except ValueError:
        pytest.fail(raw)  # the child's traceback
    doc, said = out["doc"], out["said"]
    assert doc["verdict"]["principal"] is None, doc["verdict"]  # not "idle: nothing is training"
    assert "stacks" not in doc["verdict"]["inputs"]
    assert "stacks" in doc["verdict"]["note"] and "agent" in doc["verdict"]["note"]
    problems = " | ".join(doc["problems"])
    assert "not allowed to read pid" in problems and "ptrace" in problems, problems
    assert f"pid {target.pid}: could not read its" in problems, problems
    assert said == [f"pid {target.pid} has no gputop agent, and it cannot be loaded: pid "
                    f"{target.pid} belongs to uid 0, not you: run gputop as that user or as "
                    "root, or start the job with `gputop run`: without it the verdict has no "
                    "steps, no eval/GC/checkpoint/log slices, no per-rank budgets"]  # fmt: skip
