"""Collectives by call site (``gputop/agent/callers.py``): each outermost collective's bytes,
time outstanding and calls go to who called it, whichever code that is: DDP's hook, a
ZeroRedundancyOptimizer's broadcasts after step(), the loop's own all_reduce. Two real gloo
ranks (torch.multiprocessing.spawn), in fresh interpreters."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # each test starts real processes

PROBE = """
import json, os, sys
import torch, torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


def sync_metrics(loss):
    dist.all_reduce(loss.detach().clone())

def rank(r, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
    os.environ["GPUTOP_NO_SERVER"] = "1"
    import gputop.agent as gt
    gt.init(server=False)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=r, world_size=2)
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.optim import ZeroRedundancyOptimizer
    model = DDP(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.01)
    rec = gt._rec
    for i in range(4):
        loss = model(torch.randn(8, 64)).sum()
        loss.backward()
        opt.step()  # the optimizer's own hooks end a step: ZeRO's broadcasts after its inner
        sync_metrics(loss)  # step fall in the next, with the loop's own all_reduce
        opt.zero_grad()
    if r == 0:
        by = {}
        for record in list(rec.records)[-4:]:  # the last steps' callers, summed
            for k, v in (record[11] or {}).items():  # comm_by
                by[k] = [a + b for a, b in zip(by.get(k, [0, 0, 0]), v)]
        print(json.dumps(by), flush=True)
    dist.barrier()  # both ranks done with every async call before the group goes
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # past torch's teardown race: a gloo worker thread that still holds a work
    # (DDP and ZeRO keep the group alive) takes the GIL during interpreter finalisation and
    # aborts the rank, 2 runs in ~17 of CI (torch PR 179291); this test is about the callers

if __name__ == "__main__":
    mp.spawn(rank, args=(sys.argv[1],), nprocs=2)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_each_caller_gets_its_own_bytes_time_and_calls(tmp_path):
    script = tmp_path / "probe.py"  # spawn's children import the main module from a file
    script.write_text(PROBE)
    out = subprocess.run([sys.executable, str(script), str(free_port())], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    by = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(by) == {"DDP", "probe.py:sync_metrics", "ZeroRedundancyOptimizer"}, by
    ddp, loop, zero = by["DDP"], by["probe.py:sync_metrics"], by["ZeroRedundancyOptimizer"]
    params = (64 * 64 + 64 + 64 * 4 + 4) * 4
    assert ddp[0] % params == 0 and ddp[0] > 0  # the gradients, all-reduced by DDP's hook
    assert loop[0] == 4 * loop[2] and loop[1] > 0  # one float32 scalar a call, timed
    assert 0 < zero[0] <= 2 * params and zero[2] >= 1  # each shard's parameters, broadcast


def test_a_crafted_callers_field_is_bounded_and_never_costs_the_step():
    from gputop.sources import agent_decode as dec

    item = {"step": 1, "t0_ns": 0, "dur_ns": 1_000_000, "phases": {"grad_sync": 900_000}}
    many = {f"f{i}\x1b": [1, 2, 3] for i in range(50)}
    bad = {"a": [1, 2], "b": [-1, 0, 0], "c": "x", "": [1, 1, 1], "ok": [5, 6, 7]}
    for comm_by, want in ((many, 8), (bad, 1), ("nonsense", 0), (None, 0)):
        steps, dropped = dec.parse_steps({"steps": [{**item, "comm_by": comm_by}]})
        assert dropped == 0 and len(steps[0].comm_by) == want, comm_by
    assert all(k.isprintable() for k in dec.parse_steps({"steps": [{**item, "comm_by": many}]})
               [0][0].comm_by)  # fmt: skip
