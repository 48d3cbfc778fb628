"""`gputop snapshot --json` against gputop/schemas/snapshot.schema.json: the real command's output
on simulated boards, drivers and workloads, attached to a sleeping process and to one running
gputop's agent; the writer's own output where the command line cannot reach (processes on GPUs,
MIG processes, a GPU off the bus, a target that exited); every emitted key described by the
schema; and broken copies of real output that must fail, so the schema is not vacuous."""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pynvml as N
import pytest
from tests_support import schema_object, until

from gputop import schemas
from gputop.sim import Fault, SimProcess
from gputop.snapshot import AGENT_STEPS, build_document, sample_pair

REPO = Path(__file__).resolve().parents[2]
SCHEMA = schemas.load("snapshot")
VALIDATOR = jsonschema.Draft202012Validator(
    SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
)

BOARDS = {
    "h100x8 compute": ("--sim-board", "h100x8", "--sim-scenario", "compute"),
    "a100 MIG": ("--sim-board", "a100-mig",),
    "t4 r470 mixed": ("--sim-board", "t4", "--sim-driver", "r470", "--sim-scenario", "mixed"),
    "a100 r515 power-throttled": ("--sim-board", "a100", "--sim-driver", "r515",
                                  "--sim-scenario", "power-throttled"),
    "l40s thermal-throttled": ("--sim-board", "l40s", "--sim-scenario", "thermal-throttled"),
}  # fmt: skip
"""Simulated boards that between them reach every branch the command line can: GPM and NVLink
(Hopper), MIG instances, the oldest driver (no memory v2, no GPM, no MIG), the clock-event
reasons of a capped and a hot board, and a card without NVLink."""

AGENT_JOB = """\
import time
import gputop.agent as gt
gt.init(auto_step=False)
end = time.monotonic() + 60
while time.monotonic() < end:
    with gt.DATA_WAIT:
        time.sleep(0.005)
    with gt.FORWARD:
        time.sleep(0.01)
    with gt.phase("custom"):
        time.sleep(0.002)
    gt.step(samples=8, tokens=64, flops=1e9)
"""
"""A job of plain Python (no torch) that runs gputop's agent: steps of three phases, ~60 a s."""


def validate(doc: dict[str, Any]) -> None:
    errors = sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])


def snapshot(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`gputop snapshot --json ARGS` as a user runs it, from the checkout."""
    r = subprocess.run(
        [sys.executable, "-m", "gputop", "snapshot", "--json", *args],
        capture_output=True, text=True, timeout=60, cwd=REPO, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@functools.cache
def board_snapshot(name: str) -> dict[str, Any]:
    return snapshot(*BOARDS[name])


def described(value: Any, schema: dict[str, Any], where: str) -> None:
    """Every key of ``value`` is a property of ``schema`` (where it lists properties)."""

    def resolve(s: dict[str, Any]) -> dict[str, Any]:
        return schema_object(SCHEMA, s)

    schema = resolve(schema)
    if isinstance(value, dict) and "properties" in schema:
        for k, v in value.items():
            assert k in schema["properties"], f"{where}.{k} is not in the schema"
            described(v, schema["properties"][k], f"{where}.{k}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for v in value:
            described(v, schema["items"], f"{where}[]")


# ---- the schema itself ----


def test_the_schema_is_a_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["title"] == "gputop snapshot --json, schema version 1"
    assert "snapshot" in schemas.SCHEMAS


def test_unknown_fields_are_allowed_everywhere():
    """Readers ignore fields they do not know (docs/snapshot.md): nothing closes an object."""
    text = json.dumps(SCHEMA)
    assert '"additionalProperties": false' not in text
    assert "unevaluatedProperties" not in text


# ---- real output of the command ----


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BOARDS))
def test_simulated_board_output_validates(name):
    doc = board_snapshot(name)
    validate(doc)
    assert doc["source"]["kind"] == "simulated"
    assert doc["host"] is None and doc["stacks"] is None and doc["agents"] is None
    samples = [d["sample"] for d in doc["devices"]]
    if "MIG" in name:
        assert doc["devices"][0]["mig_enabled"] is True and doc["devices"][0]["mig"]
        assert samples[0]["mig"]
    if "r470" in name:  # the oldest driver: values missing, with their reasons
        assert samples[0]["mem_reserved_bytes"] is None
        assert "mem_reserved_bytes" in samples[0]["na"]
        assert doc["devices"][0]["mig_enabled"] is None
    if "h100x8" in name:
        assert len(doc["devices"]) == 8
        assert all(s["sm_active_pct"] is not None for s in samples)
    if "throttled" in name:
        assert any(s["reasons"] for s in samples)


@pytest.mark.slow
def test_attached_to_a_sleeping_process_validates():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        doc = snapshot("--sim-board", "h100", "--pid", str(child.pid))
    finally:
        child.kill()
        child.wait()
    validate(doc)
    assert doc["host"]["pid"] == child.pid and doc["host"]["state"] == "running"
    assert doc["host"]["processes"][0]["role"] == "main"
    assert doc["agents"] == []
    stacks = doc["stacks"]  # read, or py-spy missing, or not allowed: each must validate
    assert stacks is not None
    assert stacks["problem"] is not None or stacks["processes"]


@pytest.mark.slow
def test_attached_to_a_job_running_the_agent_validates(tmp_path):
    """A rank of a launched job (RANK...) whose agent has sent steps: agents and env filled."""
    from gputop.agent.paths import socket_path

    env = {**os.environ, "GPUTOP_DIR": str(tmp_path), "RANK": "0", "LOCAL_RANK": "0",
           "WORLD_SIZE": "1", "OMP_NUM_THREADS": "1"}  # fmt: skip
    job = subprocess.Popen([sys.executable, "-c", AGENT_JOB], cwd=REPO, env=env)
    try:
        until(lambda: job.poll() is not None or socket_path(job.pid, tmp_path).exists(),
              timeout=15, what="the agent's socket")  # fmt: skip
        assert job.poll() is None, "the job ended before its agent served"

        def with_steps() -> dict | None:  # the agent has sent a few steps
            doc = snapshot("--sim-board", "a100", "--pid", str(job.pid), env=env)
            return doc if doc["agents"] and len(doc["agents"][0]["steps"]) >= 3 else None

        doc = until(with_steps, timeout=30, what="a snapshot with the agent's steps")
    finally:
        job.kill()
        job.wait()
    validate(doc)
    (agent,) = doc["agents"]
    assert agent["pid"] == job.pid and agent["rank"] == 0
    assert 0 < len(agent["steps"]) <= AGENT_STEPS
    assert {"data_wait", "forward", "custom"} <= set(agent["steps"][-1]["phases"])
    assert doc["host"]["env"]["RANK"] == "0"
    assert doc["host"]["processes"][0]["rank"] == 0


# ---- the writer where the command line cannot reach ----


class _Direct:
    """A watchdog that just calls (the simulated board does not hang here)."""

    @staticmethod
    def call(fn):
        return fn()


def test_gpu_processes_mig_processes_and_a_lost_gpu_validate(sim):
    s = sim("a100x2-mig", scenario="compute")
    s.board.devices[0].processes += [
        SimProcess(os.getpid(), 1 << 30, mig_index=0),  # visible here: local_pid set
        SimProcess(4_000_000, 2 << 30, mig_index=1),  # past pid_max: not visible, a note
    ]
    src = s.open()
    s.board.faults += [
        Fault(code=N.NVML_ERROR_NOT_SUPPORTED, symbol="nvmlDeviceGetPowerUsage", device=0),
        Fault(code=N.NVML_ERROR_GPU_IS_LOST, device=1),
    ]
    s.tick(10.0)
    samples = sample_pair(src, _Direct(), sleep=s.clock.advance)
    doc = json.loads(json.dumps(build_document(src.devices, src.capabilities, samples, "sim")))
    validate(doc)
    described(doc, SCHEMA, "snapshot")
    g0, g1 = (d["sample"] for d in doc["devices"])
    assert g0["power_w"] is None and "power_w" in g0["na"]
    procs = [p for m in g0["mig"] for p in m["processes"]]
    assert {p["pid"] for p in procs} == {os.getpid(), 4_000_000}
    assert g1["lost"] and g1["sm_clock_mhz"] is None


def test_plain_gpu_processes_validate(sim):
    s = sim("h100x2", scenario="compute")
    s.board.devices[0].processes.append(SimProcess(os.getpid(), 4 << 30, sm_share=1.0))
    src = s.open()
    s.tick(10.0)
    samples = sample_pair(src, _Direct(), sleep=s.clock.advance)
    doc = json.loads(json.dumps(build_document(src.devices, src.capabilities, samples, "sim")))
    validate(doc)
    (p,) = doc["devices"][0]["sample"]["processes"]
    assert p["pid"] == os.getpid() and p["used_mem_bytes"] == 4 << 30


@pytest.mark.slow
def test_a_target_that_exited_validates():
    from gputop.sources.host import HostSource

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host = HostSource.open(child.pid)
        host.sample()
    finally:
        child.kill()
        child.wait()
    gone = host.sample()
    assert gone.state == "exited"
    doc = json.loads(json.dumps(build_document([], None, [], "sim", host=gone)))
    validate({**doc, "source": board_snapshot("h100x8 compute")["source"]})
    assert doc["host"]["state"] == "exited" and doc["host"]["processes"] == []


# ---- every key is described, and broken output fails ----


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BOARDS))
def test_the_schema_describes_every_key_the_command_emits(name):
    """New fields go into the schema too."""
    described(board_snapshot(name), SCHEMA, "snapshot")


BREAKS = {
    "a clock as text": (("devices", 0, "sample", "sm_clock_mhz"), "fast"),
    "a byte count as a float": (("devices", 0, "mem_total_bytes"), 85_520_809_984.5),
    "an unknown reason": (("devices", 0, "sample", "reasons"), ["throttled"]),
    "an unknown source": (("source", "kind"), "cuda"),
    "a later schema version": (("schema_version",), 2),
    "a local time": (("taken_at",), "2026-01-01 12:00:00"),
    "a utilisation over 100 %": (("devices", 0, "sample", "util_gpu_pct"), 130),
    "a reason given as a number": (("devices", 0, "sample", "na"), {"power_w": 0}),
    "a sample that is a list": (("devices", 0, "sample"), []),
    "no board for a simulation": (("source", "board"), None),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BREAKS))
def test_broken_output_fails(name):
    path, value = BREAKS[name]
    doc = copy.deepcopy(board_snapshot("h100x8 compute"))
    validate(doc)  # as written it passes
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    errors = list(VALIDATOR.iter_errors(doc))
    assert errors, f"{name}: still valid"
    assert any(tuple(e.absolute_path)[: len(path)] == path for e in errors), [
        (list(e.absolute_path), e.message) for e in errors
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "missing",
    [("taken_at",), ("source", "capabilities"), ("devices", 0, "sample"),
     ("devices", 0, "sample", "na"), ("devices", 0, "gpm_supported")],
)  # fmt: skip
def test_output_without_a_required_field_fails(missing):
    doc = copy.deepcopy(board_snapshot("h100x8 compute"))
    parent = doc
    for key in missing[:-1]:
        parent = parent[key]
    del parent[missing[-1]]
    assert not VALIDATOR.is_valid(doc), missing
