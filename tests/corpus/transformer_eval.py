"""A small transformer language model on random token batches, with a short evaluation (eight
batches, no_grad) every 100 steps: the evaluation is a few per cent of the time. Healthy."""

import argparse
import math
import time

import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=2000, dim=128, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


@torch.no_grad()
def evaluate(model, batches):
    model.eval()
    losses = [nn.functional.cross_entropy(model(b[:, :-1]).transpose(1, 2), b[:, 1:])
              for b in batches]  # fmt: skip
    model.train()
    return math.exp(float(sum(losses) / len(losses)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    val = [torch.randint(0, 2000, (16, 65)) for _ in range(8)]
    end, step = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        batch = torch.randint(0, 2000, (16, 65))
        loss = nn.functional.cross_entropy(model(batch[:, :-1]).transpose(1, 2), batch[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 100 == 0:
            print(f"step {step} val ppl {evaluate(model, val):.1f}", flush=True)


if __name__ == "__main__":
    main()
