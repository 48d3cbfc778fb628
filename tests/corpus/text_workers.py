"""Text classification whose DataLoader workers clean raw text in Python on every access:
Unicode normalisation, HTML entity and markup stripping, regex tokenising with the `re`
module's functions, then vocabulary lookups. Two workers on a small model cannot keep up."""

import argparse
import html
import random
import re
import time
import unicodedata

import torch
from _clocks import Clocks
from torch import nn
from torch.utils.data import DataLoader, Dataset

WORDS = [
    "caf\u00e9",
    "na\u00efve",
    "&amp;",
    "<b>great</b>",
    "don't",
    "r\u00e9sum\u00e9",
    "42",
    "movie",
    "plot",
    "actor",
    "&quot;fine&quot;",
    "terrible!",
    "\uff21\uff22\uff23",
]


class Reviews(Dataset):
    def __init__(self, n=4000, seed=0, ahead=False):
        rng = random.Random(seed)
        self.raw = [" ".join(rng.choices(WORDS, k=300)) for _ in range(n)]
        self.vocab = {}
        self.ids = [self.encode(i) for i in range(n)] if ahead else None

    def __len__(self):
        return len(self.raw)

    def clean(self, text):
        text = unicodedata.normalize("NFKC", html.unescape(text))
        text = re.sub(r"<[^>]+>", " ", text)
        return re.findall(r"[\w']+|[^\w\s]", text.lower())

    def encode(self, i):
        ids = [hash(t) % 8192 for t in self.clean(self.raw[i])][:256]
        return torch.tensor(ids + [0] * (256 - len(ids)))

    def __getitem__(self, i):
        return (self.ids[i] if self.ids is not None else self.encode(i)), i % 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--tokenise-ahead", action="store_true",
                   help="the lever applied: token ids made once before training")  # fmt: skip
    args = p.parse_args()
    torch.set_num_threads(1)
    model = nn.Sequential(nn.EmbeddingBag(8192, 64), nn.Linear(64, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = Reviews(ahead=args.tokenise_ahead)
    loader = DataLoader(data, batch_size=64, shuffle=True, num_workers=args.workers,
                        persistent_workers=True)  # fmt: skip
    clocks = Clocks()  # the script's own timers (_clocks.py), for the bench
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        for tokens, labels in clocks.batches(loader):
            with clocks.part("compute"):
                loss = nn.functional.cross_entropy(model(tokens), labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
            if time.monotonic() >= end:
                break


if __name__ == "__main__":
    main()
