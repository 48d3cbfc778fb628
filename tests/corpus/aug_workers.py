"""Image classification with a heavy CPU augmentation pipeline (random resized crop, blur,
colour jitter, done per image with tensor ops) in a Dataset read by a DataLoader with two
workers, on a two-core machine. Both workers are busy all the time and the model still waits
for batches."""

import argparse
import time

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


class AugmentedImages(Dataset):
    def __len__(self):
        return 50_000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, 128, 128, generator=g)
        top, left = torch.randint(0, 32, (2,), generator=g).tolist()
        img = img[:, top : top + 96, left : left + 96].unsqueeze(0)
        img = F.interpolate(img, size=(64, 64), mode="bilinear", align_corners=False)
        kernel = torch.full((3, 1, 5, 5), 1 / 25)
        for _ in range(8):  # blur and jitter, a few rounds
            img = F.conv2d(img, kernel, padding=2, groups=3)
            img = (img * (0.9 + 0.2 * torch.rand(1, 3, 1, 1, generator=g))).clamp(0, 1)
        return img.squeeze(0), i % 10


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                          nn.Flatten(), nn.Linear(256, 10))  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(AugmentedImages(), batch_size=32, shuffle=True, num_workers=2,
                        persistent_workers=True)  # fmt: skip
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if time.monotonic() >= end:
                break


if __name__ == "__main__":
    main()
