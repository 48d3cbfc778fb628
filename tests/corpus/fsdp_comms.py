"""FSDP2 under torchrun, two ranks on gloo: each of six 1024x1024 layers is sharded with
``fully_shard`` and gathered again for every forward and backward, while each rank's batch is
only 8 samples, so the step is mostly waiting for the all-gathers and reduce-scatters."""

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    model = nn.Sequential(*(nn.Sequential(nn.Linear(1024, 1024), nn.ReLU()) for _ in range(6)))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 1024)
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if rank == 0 and step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
