"""A video-clip dataset stored as one small file per frame (16 frames of 8 KB per clip, 16k
files, written to a temporary directory on the first run), read by a DataLoader with two
workers: every item is 16 open/read/close calls, and the tiny model waits on them."""

import argparse
import os
import tempfile
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FRAMES, FRAME_BYTES = 16, 8192


def write_dataset(root, clips):
    for c in range(clips):
        os.makedirs(os.path.join(root, f"clip{c:05d}"), exist_ok=True)
        for f in range(FRAMES):
            with open(os.path.join(root, f"clip{c:05d}", f"{f:03d}.bin"), "wb") as out:
                out.write(os.urandom(FRAME_BYTES))


class Clips(Dataset):
    def __init__(self, root):
        self.clips = sorted(os.path.join(root, d) for d in os.listdir(root))

    def __len__(self):
        return len(self.clips)

    def __getitem__(self, i):
        frames = []
        for name in sorted(os.listdir(self.clips[i])):
            with open(os.path.join(self.clips[i], name), "rb") as f:
                frames.append(torch.frombuffer(bytearray(f.read()), dtype=torch.uint8))
        return torch.stack(frames).float().mean(1), i % 5


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--clips", type=int, default=1000)
    p.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "corpus-clips"))
    args = p.parse_args()
    if not os.path.isdir(args.root):
        write_dataset(args.root + ".part", args.clips)
        os.rename(args.root + ".part", args.root)
    root = args.root
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(FRAMES, 32), nn.ReLU(), nn.Linear(32, 5))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Clips(root), batch_size=32, shuffle=True, num_workers=2,
                        persistent_workers=True)  # fmt: skip
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if time.monotonic() >= end:
                break


if __name__ == "__main__":
    main()
