"""A long start: before the first step the script builds its vocabulary and tokenises a text
corpus in pure Python (about 12 s of real CPU work on a small machine), then trains a healthy
loop on the in-memory tokens. The quiet start is work, not a hang."""

import argparse
import collections
import random
import time

import torch
from torch import nn


def build_dataset(n_docs, seed=0):
    rng = random.Random(seed)
    syllables = ["ka", "to", "ri", "mu", "sen", "la", "po", "ve", "di", "no"]
    docs = [
        " ".join("".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(60))
        for _ in range(n_docs)
    ]
    counts = collections.Counter(w for d in docs for w in d.split())
    vocab = {w: i for i, (w, _) in enumerate(counts.most_common(4095), start=1)}
    return [[vocab.get(w, 0) for w in d.split()] for d in docs], len(vocab) + 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--docs", type=int, default=180_000)
    args = p.parse_args()
    torch.set_num_threads(1)
    start = time.monotonic()
    tokens, vocab_size = build_dataset(args.docs)
    data = torch.tensor(tokens)
    print(f"dataset ready in {time.monotonic() - start:.1f} s", flush=True)
    model = nn.Sequential(nn.Embedding(vocab_size, 128), nn.Flatten(), nn.Linear(128 * 60, 512),
                          nn.ReLU(), nn.Linear(512, vocab_size))  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = 0
    while time.monotonic() - start < args.seconds:
        batch = data[torch.randint(0, len(data), (64,))]
        loss = nn.functional.cross_entropy(model(batch), batch[:, 0])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1


if __name__ == "__main__":
    main()
