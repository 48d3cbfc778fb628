"""Two gloo ranks with several costs at once, each at a stated share of wall time: gradients
averaged by hand with all_reduce (--sync: rounds of it, as gradient compression retries
would), a slow per-rank logging handler (--logging), each rank saving its own checkpoint shard
(--checkpoint), and rank 1 working longer on its share of the data (--straggler: rank 0 then
waits for it in the all_reduce). Each cost is sized to its share of the measured wall time as
the loop runs (_paced.py's tick: that holds whatever the all_reduce itself costs). Launched by
torchrun, or by torch.multiprocessing.spawn with --spawn.

    torchrun --nproc-per-node 2 mixed_ranks.py --sync 0.30 --logging 0.10 --seconds 60
    python mixed_ranks.py --spawn --straggler 0.25 --checkpoint 0.10 --port 29555
"""

import argparse
import logging
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _clocks import Clocks
from _paced import Pacer, busy
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
p.add_argument("--spawn", action="store_true", help="start two ranks with mp.spawn")
p.add_argument("--port", type=int, default=29555)
COSTS = ("sync", "logging", "checkpoint", "straggler")
for cost in COSTS:
    p.add_argument(f"--{cost}", type=float, default=0.0, help="share of wall time")
args = p.parse_args()


class SlowSink(logging.Handler):
    """Ships each record to a log service that answers slowly."""

    def __init__(self, pacer: Pacer) -> None:
        super().__init__()
        self.pacer = pacer

    def emit(self, record: logging.LogRecord) -> None:
        with self.pacer.time("log"):
            time.sleep(self.pacer.owed("log"))


def train(rank: int) -> None:
    if args.spawn:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(args.port))
        dist.init_process_group("gloo", rank=rank, world_size=2)
    else:
        dist.init_process_group("gloo")
        rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    # every rank paces by the same shares (they share one wall clock); only rank 1 spends the
    # straggler's share working, the others spend it waiting for rank 1
    shares = {"log" if k == "logging" else k: getattr(args, k) for k in COSTS}
    pacer = Pacer(shares)
    log = logging.getLogger(f"train.{rank}")
    log.addHandler(SlowSink(pacer))
    log.setLevel(logging.INFO)
    log.propagate = False
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(1024, 512), torch.randint(0, 10, (1024,))
    shard = os.path.join(tempfile.gettempdir(), f"corpus-mixed-ranks-{rank}.pt")
    table = torch.randn(8_000_000)  # this rank's shard of an embedding table (32 MB), saved too
    # the rank that arrives last at the all_reduce times it without waiting: it sizes the sync
    decides = 1 if args.straggler else 0
    plan = torch.zeros(3, dtype=torch.int64)
    """[all_reduce rounds this step, stop, checkpoint]: one rank decides, every rank follows
    (ranks save their shards at the same step, as a job checkpointing every N steps does)."""
    per_round = 0.0
    clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
    end = time.monotonic() + args.seconds
    while True:
        pacer.tick()  # shares of wall time: the all_reduce's own cost is not sized here
        with clocks.part("compute"):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
        if shares["straggler"] and rank == 1:
            with pacer.time("straggler"), clocks.part("loop"):
                busy(pacer.owed("straggler"))  # its longer sequences
        elif shares["straggler"]:
            pacer.spent("straggler", pacer.owed("straggler"))  # waited for in the all_reduce
        grads = torch.cat([q.grad.flatten() for q in model.parameters()])
        t1 = time.perf_counter()
        with clocks.part("comms"):  # the broadcast and the rounds: the whole collective wait
            if rank == decides:
                want = pacer.owed("sync")
                plan[0] = max(1, round(want / per_round)) if per_round else 1
                plan[1] = int(time.monotonic() >= end)
                plan[2] = int(pacer.due("checkpoint"))
            dist.broadcast(plan, src=decides)
            rounds = int(plan[0])
            for _ in range(rounds):
                dist.all_reduce(grads)
        took = time.perf_counter() - t1
        per_round = took / rounds
        pacer.spent("sync", took)
        if plan[1]:
            break
        grads /= 2 * rounds
        i = 0
        for q in model.parameters():
            q.grad.copy_(grads[i : i + q.numel()].view_as(q))
            i += q.numel()
        with clocks.part("compute"):
            opt.step()
        if args.logging:
            with clocks.part("log"):
                log.info("rank %d loss %.4f", rank, loss.item())
        if plan[2]:
            with pacer.time("checkpoint"), clocks.part("checkpoint"):
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                            "table": table}, shard)  # fmt: skip
        clocks.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    if args.spawn:
        mp.spawn(train, nprocs=2)
    else:
        train(int(os.environ.get("RANK", "0")))
