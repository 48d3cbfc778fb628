"""A long start: before the first step the script builds its vocabulary and tokenises a text
corpus in pure Python (about 12 s of real CPU work, sized by the CPU time it takes, so it lasts
as long on a slow or busy machine), then trains a healthy loop on the in-memory tokens. The
quiet start is work, not a hang."""

import argparse
import collections
import random
import time

import torch
from torch import nn


def build_dataset(warmup_s, seed=0):
    """Documents made until 80% of ``warmup_s`` of CPU has gone, then counted and tokenised
    (about a quarter as long again)."""
    rng = random.Random(seed)
    syllables = ["ka", "to", "ri", "mu", "sen", "la", "po", "ve", "di", "no"]
    docs = []
    until = time.process_time() + 0.8 * warmup_s
    while time.process_time() < until:
        docs += [
            " ".join("".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(60))
            for _ in range(500)
        ]
    counts = collections.Counter(w for d in docs for w in d.split())
    vocab = {w: i for i, (w, _) in enumerate(counts.most_common(4095), start=1)}
    return [[vocab.get(w, 0) for w in d.split()] for d in docs], len(vocab) + 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--warmup", type=float, default=12.0, help="CPU seconds before the first step")
    args = p.parse_args()
    torch.set_num_threads(1)
    start = time.monotonic()
    tokens, vocab_size = build_dataset(args.warmup)
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
