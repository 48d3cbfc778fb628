"""Side work and the compute no module hook sees, timed where the loop calls them: logging
(the logging package, ``print``, tqdm's redraws, wandb, TensorBoard, MLflow), checkpoints
saved through a library (safetensors, transformers, Lightning, accelerate: ``torch.save`` is
auto.py's), the gradient work between backward and the optimizer (clipping, ``zero_grad``, a
weights' moving average, AMP's scaler) and the functional losses. Each is timed by the clock
around the call, so its share of the step is measured, not inferred from stack samples that
land in the loop's own time; what no entry point delimits is still the loop's.

Only what the process has imported is wrapped (a library imported later is wrapped on the
agent thread's next pass); the wrapper is auto.py's (the training thread only, nothing while
torch.compile traces or a CUDA graph is captured, nothing inside a user's own marker).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..vocab import steps as phase

Site = tuple[str, str, str]
"""(module, class in it or "" for a module-level function, attribute)."""


def _each(module: str, cls: str, names: tuple[str, ...]) -> tuple[Site, ...]:
    return tuple((module, cls, name) for name in names)


SUMMARY_WRITES = ("add_scalar", "add_scalars", "add_histogram", "add_image", "add_text", "flush")
METRIC_LOGS = ("log_metric", "log_metrics")
LOG_CALLS: tuple[Site, ...] = (
    ("logging", "Logger", "handle"),  # every handler of a record, after the level check
    ("builtins", "", "print"),
    ("tqdm.std", "tqdm", "display"),  # a redraw (update() itself is cheap until it redraws)
    ("wandb.sdk.wandb_run", "Run", "log"),
    *_each("torch.utils.tensorboard.writer", "SummaryWriter", SUMMARY_WRITES),
    *_each("mlflow", "", METRIC_LOGS),
    *_each("mlflow.tracking.fluent", "", METRIC_LOGS),  # where mlflow's names come from
)
CHECKPOINT_CALLS: tuple[Site, ...] = (
    ("safetensors.torch", "", "save_file"),
    ("safetensors.torch", "", "save_model"),
    ("transformers.modeling_utils", "PreTrainedModel", "save_pretrained"),
    ("transformers.trainer", "Trainer", "_save_checkpoint"),
    ("lightning.pytorch.trainer.trainer", "Trainer", "save_checkpoint"),
    ("pytorch_lightning.trainer.trainer", "Trainer", "save_checkpoint"),
    ("accelerate.accelerator", "Accelerator", "save_state"),
)
CLIPS = ("clip_grad_norm_", "clip_grad_value_")
GRADIENT_CALLS: tuple[Site, ...] = (
    *_each("torch.nn.utils", "", CLIPS),
    *_each("torch.nn.utils.clip_grad", "", CLIPS),
    ("torch.optim.optimizer", "Optimizer", "zero_grad"),
    ("torch.optim.swa_utils", "AveragedModel", "update_parameters"),
    ("torch.amp.grad_scaler", "GradScaler", "unscale_"),
    ("torch.amp.grad_scaler", "GradScaler", "update"),
)
"""The optimizer's side of the step: compute on the gradients and weights outside
``optimizer.step()``."""
LOSSES = (
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
)
LOSS_CALLS: tuple[Site, ...] = _each("torch.nn.functional", "", LOSSES)
"""Functional losses, called outside the model's forward (a loss module is a module: its
forward is timed as the model's)."""

Choose = Callable[[], Any]
"""Returns the phase (``recorder.AutoPhase``) a call is timed in, or None."""


def sites(rec: Any, loss: Choose) -> tuple[tuple[Site, Choose], ...]:
    """Every site with how its phase is chosen: fixed, or for a loss, the forward's while
    training and the evaluation's otherwise (``loss``)."""
    fixed = (
        (LOG_CALLS, rec.auto[phase.LOG]),
        (CHECKPOINT_CALLS, rec.auto[phase.CHECKPOINT]),
        (GRADIENT_CALLS, rec.auto[phase.OPTIMIZER]),
    )
    out: list[tuple[Site, Choose]] = []
    for group, ph in fixed:
        out += [(site, always(ph)) for site in group]
    out += [(site, loss) for site in LOSS_CALLS]
    return tuple(out)


def always(ph: Any) -> Choose:
    """A fixed phase as a chooser."""
    return lambda: ph


def install(
    todo: list[tuple[Site, Choose]],
    ready: Callable[[str], Any],
    wrap: Callable[[Any, str, Choose], None],
) -> None:
    """Wraps each site of ``todo`` whose module is imported, and takes it off the list (the
    rest wait for the next pass; a library version without the attribute is not asked
    again). ``wrap(owner, attribute, choose)``."""
    for item in list(todo):
        (module, cls, attr), choose = item
        m = ready(module)
        if m is None:
            continue
        todo.remove(item)
        owner = getattr(m, cls, None) if cls else m
        if owner is not None:
            wrap(owner, attr, choose)
