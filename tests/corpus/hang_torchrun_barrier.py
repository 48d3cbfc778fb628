"""DDP under torchrun with an epoch-end barrier every 50 steps (rank 0 writes the checkpoint,
the others wait). Rank 1 hands each epoch's checkpoint to an uploader thread under a lock; after
--stuck-after seconds the upload never returns while holding the lock, so rank 1 blocks on the
lock at the next epoch end and rank 0 waits in dist.barrier() for good."""

import argparse
import os
import tempfile
import threading
import time

import torch
import torch.distributed as dist
from torch import nn

upload_lock = threading.Lock()


def uploader(stuck_after):
    time.sleep(stuck_after)
    upload_lock.acquire()  # a network call that never comes back, lock held
    threading.Event().wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--stuck-after", type=float, default=8)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10))
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(512, 512), torch.randint(0, 10, (512,))
    out = os.path.join(tempfile.gettempdir(), "corpus-barrier")
    os.makedirs(out, exist_ok=True)
    if rank == 1:
        threading.Thread(target=uploader, args=(args.stuck_after,), daemon=True).start()
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 50 == 0:
            if rank == 0:
                torch.save(model.module.state_dict(), os.path.join(out, "last.pt"))
            else:
                with upload_lock:
                    pass  # queue the previous epoch's upload
            dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
