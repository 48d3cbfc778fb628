"""The job's setup read from its live objects (gputop/agent/setup.py, gputop/model/setup.py):
the parallel wrapper from real torch objects, the framework from the training thread's frames,
accelerate's state, and the document diagnose and the why screen show."""

from __future__ import annotations

import enum
import sys
import threading
import types

from gputop.agent import setup
from gputop.model.setup import parallel_kind, setup_of
from gputop.schemas import load
from gputop.vocab import setup as names


def test_accelerate_is_read_from_its_shared_state(monkeypatch):
    state = types.ModuleType("accelerate.state")

    class DistributedType(enum.Enum):
        MULTI_GPU = "MULTI_GPU"

    state.AcceleratorState = type("AcceleratorState", (), {"_shared_state": {  # type: ignore[attr-defined]
        "distributed_type": DistributedType.MULTI_GPU, "_mixed_precision": "bf16",
        "num_processes": 2}})  # fmt: skip
    monkeypatch.setitem(sys.modules, "accelerate.state", state)
    assert setup.framework_of([]) == {"kind": names.ACCELERATE, "distributed_type": "MULTI_GPU",
                                      "mixed_precision": "bf16", "num_processes": 2}  # fmt: skip


def test_nothing_known_is_said_as_nothing(monkeypatch):
    monkeypatch.delitem(sys.modules, "accelerate.state", raising=False)
    assert setup.framework_of(setup.frames_of(threading.get_ident())) == {}
    assert setup.parallel_of(None, False) == {}
    assert setup_of(None) is None and setup_of({}) is None
    assert parallel_kind({"parallel": {"kind": "something new"}}) is None


def test_the_document_and_the_schema_name_the_same_setups():
    doc = setup_of({"parallel": {"kind": "DDP", "bucket_cap_mb": 25.0}, "compiled": False,
                    "autocast": True, "autocast_dtype": "bfloat16", "intra_op_threads": 4,
                    "dataloader": {"num_workers": 2}})  # fmt: skip
    assert doc == {
        "parallel": {"kind": "DDP", "bucket_cap_mb": 25.0}, "framework": None,
        "dataloader": {"num_workers": 2}, "compiled": False, "autocast_dtype": "bfloat16",
        "torch_threads": 4, "interop_threads": None, "torch": None,
    }  # fmt: skip
    schema = load("diagnose")["properties"]["setup"]
    props = schema["properties"]
    assert props["parallel"]["properties"]["kind"]["enum"] == list(names.PARALLEL_KINDS)
    assert props["framework"]["properties"]["kind"]["enum"] == list(names.FRAMEWORKS)
    assert set(schema["required"]) == set(doc)


def test_a_setup_gputop_does_not_know_is_no_setup():
    doc = setup_of({"parallel": {"kind": "Megatron"}, "framework": {"kind": "keras"},
                    "torch": "2.13.0"})  # fmt: skip
    assert doc is not None and doc["parallel"] is None and doc["framework"] is None


def test_a_job_tearing_down_keeps_the_setup_it_had(monkeypatch):
    monkeypatch.setattr(setup, "_known", {})
    ddp = {"kind": names.DDP, "bucket_cap_mb": 25.0}
    assert setup.kept("parallel", {"kind": names.NONE}) == {"kind": names.NONE}
    assert setup.kept("parallel", ddp) == ddp
    assert setup.kept("parallel", {}) == ddp  # the model freed at exit
    assert setup.kept("parallel", {"kind": names.NONE}) == ddp  # the group destroyed
    assert setup.kept("parallel", {"kind": names.DIRECT}) == ddp  # its eval model, unwrapped
    fsdp = {"kind": names.FSDP2, "shard_size": 2}
    assert setup.kept("parallel", fsdp) == fsdp  # another wrapper: the newer reading
    assert setup.kept("framework", {}) == {}
