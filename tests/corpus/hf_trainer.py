"""A transformers Trainer fine-tuning a small BERT classifier built from its config (no
download): synthetic token ids, the Trainer's own DataLoader, logging every 50 steps, no
evaluation and no checkpoints. Healthy: the model's forward and backward are the step."""

import argparse
import tempfile
import time

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=60)
args = p.parse_args()
torch.set_num_threads(1)


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int) -> dict:
        g = torch.Generator().manual_seed(i)
        return {
            "input_ids": torch.randint(0, 8000, (64,), generator=g),
            "labels": torch.tensor(i % 2),
        }


class StopAfter(TrainerCallback):
    """The job's own time limit (a real run stops at max_steps)."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def on_step_end(self, _args, state, control, **kwargs):
        if time.monotonic() > self.end:
            control.should_training_stop = True


config = BertConfig(vocab_size=8000, hidden_size=256, num_hidden_layers=4,
                    num_attention_heads=4, intermediate_size=1024)  # fmt: skip
model = BertForSequenceClassification(config)
training = TrainingArguments(
    output_dir=tempfile.mkdtemp(prefix="corpus-hf-"),
    per_device_train_batch_size=16,
    max_steps=1_000_000,
    logging_steps=50,
    save_strategy="no",
    report_to=[],
    use_cpu=True,
    disable_tqdm=True,
)
trainer = Trainer(model=model, args=training, train_dataset=Tokens(),
                  callbacks=[StopAfter(args.seconds)])  # fmt: skip
trainer.train()
