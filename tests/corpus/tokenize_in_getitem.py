"""Text classification where each item is tokenised in __getitem__ in pure Python (lower-case,
regex split, vocabulary lookups, padding) and the DataLoader has num_workers=0: the main
process prepares every batch itself while the small model waits."""

import argparse
import random
import re
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

WORD = re.compile(r"[a-z']+|[0-9]+|[^\sa-z0-9]")


class Reviews(Dataset):
    def __init__(self, n=5000, seed=0):
        rng = random.Random(seed)
        words = [f"Word{i}" for i in range(3000)] + ["great!", "bad.", "isn't", "42"]
        self.texts = [" ".join(rng.choices(words, k=400)) for _ in range(n)]
        self.vocab = {w.lower(): i + 2 for i, w in enumerate(words)}

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        ids = [self.vocab.get(tok, 1) for tok in WORD.findall(self.texts[i].lower())]
        ids = (ids + [0] * 512)[:512]
        return torch.tensor(ids), i % 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    model = nn.Sequential(nn.EmbeddingBag(4000, 64), nn.Linear(64, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(Reviews(), batch_size=64, shuffle=True)
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        for tokens, labels in loader:
            loss = nn.functional.cross_entropy(model(tokens), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if time.monotonic() >= end:
                break


if __name__ == "__main__":
    main()
