"""The job's setup read from live objects: the parallel wrapper from real torch objects in a
child Python (torch.distributed needs a process group of its own), and the framework from the
frames of a thread running a Lightning or transformers loop."""

from __future__ import annotations

import enum
import json
import subprocess
import sys
import textwrap
import threading
import types
from pathlib import Path

import pytest

from gputop.agent import setup
from gputop.vocab import setup as names

pytestmark = pytest.mark.slow


PROBE = """
import json, os, sys
import torch, torch.distributed as dist
from torch import nn
from gputop.agent import setup
os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", sys.argv[1]
out = {"before": setup.parallel_of(nn.Linear(2, 2), dist.is_initialized())}
dist.init_process_group("gloo", rank=0, world_size=1)
def model():
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
from torch.nn.parallel import DistributedDataParallel as DDP
out["ddp"] = setup.parallel_of(DDP(model(), bucket_cap_mb=50, static_graph=True), True)
from torch.distributed.fsdp import fully_shard
m = model()
fully_shard(m, reshard_after_forward=False)
out["fsdp2"] = setup.parallel_of(m, True)
layered = model()
for layer in (layered[0], layered[2]):  # the usual way: each layer, then the root
    fully_shard(layer)
fully_shard(layered)
out["fsdp2_layers"] = setup.parallel_of(layered, True)
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
out["fsdp1"] = setup.parallel_of(FSDP(model(), device_id=torch.device("cpu")), True)
out["plain"] = setup.parallel_of(model(), True)
print(json.dumps(out))
"""


def test_the_parallel_wrapper_and_its_settings_from_real_torch_objects(tmp_path):
    pytest.importorskip("torch")
    from tests_support import free_port

    out = subprocess.run([sys.executable, "-c", PROBE, str(free_port())], cwd=tmp_path,
                         capture_output=True, text=True, timeout=180)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["before"] == {"kind": names.NONE}
    assert got["ddp"] == {
        "kind": names.DDP, "bucket_cap_mb": 50.0, "gradient_as_bucket_view": False,
        "static_graph": True, "find_unused_parameters": False, "broadcast_buffers": True,
    }  # fmt: skip
    assert got["fsdp2"] == {"kind": names.FSDP2, "shard_size": 1, "hsdp": False,
                            "reshard_after_forward": False}  # fmt: skip
    # the layers' choice (the default), not the root's, which FSDP2 keeps unsharded anyway
    assert got["fsdp2_layers"]["reshard_after_forward"] is True, got["fsdp2_layers"]
    assert got["fsdp1"]["kind"] == names.FSDP1
    assert got["fsdp1"]["sharding_strategy"] == "NO_SHARD"  # FSDP's own choice on one rank
    assert got["fsdp1"]["backward_prefetch"] == "BACKWARD_PRE"
    assert got["plain"] == {"kind": names.DIRECT}


LOOPS = {
    "lightning/pytorch/loops/fit_loop.py": """
        class FitLoop:
            def __init__(self, trainer):
                self.trainer = trainer
            def run(self, done):
                done.wait(30)
    """,
    "transformers/trainer.py": """
        class Trainer:
            def __init__(self, args):
                self.args = args
            def _inner_training_loop(self, done):
                done.wait(30)
    """,
}


def _running(tmp_path: Path, rel: str, make) -> tuple[threading.Thread, threading.Event, str]:
    """A thread whose stack holds a frame of ``rel`` (a framework's file) with ``self``."""
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(LOOPS[rel]))
    module: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), module)
    done = threading.Event()
    target = make(module)
    thread = threading.Thread(target=target, args=(done,), daemon=True)
    thread.start()
    return thread, done, str(path)


def _framework_seen(tmp_path: Path, rel: str, make) -> dict:
    """``framework_of`` while a thread runs the framework's loop of ``rel``."""
    thread, done, path = _running(tmp_path, rel, make)
    try:
        return setup.framework_of(_frames_in(thread, path))
    finally:
        done.set()
        thread.join()


def _frames_in(thread: threading.Thread, path: str) -> list:
    """The thread's frames once one of them runs ``path``."""
    for _ in range(500):
        frames = setup.frames_of(thread.ident)
        if any(f.f_code.co_filename == path for f in frames):
            return frames
        threading.Event().wait(0.01)
    raise AssertionError(f"no frame of {path}")


class Precision(enum.Enum):
    BF16 = "bf16-mixed"


def test_a_lightning_trainer_is_found_in_the_training_threads_frames(tmp_path):
    trainer = types.SimpleNamespace(
        fit_loop=object(), val_check_interval=50, check_val_every_n_epoch=1,
        log_every_n_steps=10, accumulate_grad_batches=4, precision=Precision.BF16,
        strategy=types.SimpleNamespace(),
    )  # fmt: skip
    got = _framework_seen(tmp_path, "lightning/pytorch/loops/fit_loop.py",
                          lambda m: m["FitLoop"](trainer).run)  # fmt: skip
    assert got == {
        "kind": names.LIGHTNING, "val_check_interval": 50, "check_val_every_n_epoch": 1,
        "log_every_n_steps": 10, "accumulate_grad_batches": 4, "precision": "BF16",
        "strategy": "SimpleNamespace",
    }  # fmt: skip


def test_a_transformers_trainer_is_found_with_its_intervals(tmp_path):
    args = types.SimpleNamespace(
        eval_strategy="steps", eval_steps=200, logging_steps=10, save_strategy="steps",
        save_steps=500, gradient_accumulation_steps=1, dataloader_num_workers=0,
    )  # fmt: skip
    got = _framework_seen(tmp_path, "transformers/trainer.py",
                          lambda m: m["Trainer"](args)._inner_training_loop)  # fmt: skip
    assert got["kind"] == names.TRANSFORMERS and got["eval_steps"] == 200
    assert got["logging_steps"] == 10 and got["save_steps"] == 500
