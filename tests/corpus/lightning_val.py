"""A Lightning Trainer whose validation loop is most of the wall time: a small classifier,
training batches from a DataLoader with one worker, and a validation set four times the
training epoch checked every epoch. Nothing of gputop in it; Lightning runs the validation
under inference_mode with its own loader."""

import argparse
import time

import lightning as L
import torch
from _clocks import Clocks
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
args = p.parse_args()
torch.set_num_threads(1)


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))

    def training_step(self, batch, _):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())


class StopAfter(L.Callback):
    """The job's own time limit (a real job stops at max_epochs; this one at --seconds)."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def on_train_batch_end(self, trainer, *_):
        if time.monotonic() > self.end:
            trainer.should_stop = True


class JobClocks(L.Callback):
    """The script's own timers (_clocks.py), for the bench: from one training batch's end to
    the next one's start it waits for data, from start to end it computes, and the validation
    loop is its evaluation."""

    def __init__(self) -> None:
        self.clocks = Clocks()

    def on_train_batch_start(self, *_):
        self.clocks.start("compute")

    def on_train_batch_end(self, *_):
        self.clocks.stop()
        self.clocks.step()
        self.clocks.start("data")

    def on_validation_start(self, *_):
        self.clocks.start("eval")

    def on_validation_end(self, *_):
        self.clocks.start("data")


train = TensorDataset(torch.randn(4096, 256), torch.randint(0, 10, (4096,)))
val = TensorDataset(torch.randn(16384, 256), torch.randint(0, 10, (16384,)))
trainer = L.Trainer(
    accelerator="cpu",
    max_epochs=-1,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    callbacks=[StopAfter(args.seconds), JobClocks()],
)
trainer.fit(
    Classifier(),
    DataLoader(train, batch_size=64, shuffle=True, num_workers=1, persistent_workers=True),
    DataLoader(val, batch_size=64),
)
