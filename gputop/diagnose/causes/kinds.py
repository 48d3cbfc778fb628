"""How a cause says what consumes a slice (``model/slice_work.py``) and the levers that fit
that kind of work: a fast tokenizer where the frames show text, a smaller decode where they
show images, never a lever for a kind the frames do not show (docs/facts/bounds.md, "What
consumes a slice"). Shared by the causes of the data, side-work and loop slices. Pure."""

from __future__ import annotations

from gputop.diagnose.findings import Evidence
from gputop.diagnose.lever import Lever
from gputop.model.frame_kinds import (
    AUDIO,
    COLLATE,
    IMAGE,
    KIND_NAMES,
    LOGGING,
    NETWORK,
    NUMERIC,
    OWN,
    READ,
    SERIALISE,
    TEXT,
)
from gputop.model.slice_work import SliceWork
from gputop.model.stacks import Frame
from gputop.vocab import budget as slices

NAMED = 0.15
"""Share of a slice's samples from which a kind is named and its levers offered. A kind's
share is a floor: a C call in the job's own line that names no library hides more of the same
work (a tokeniser's ``hash(t)`` over its tokens), so a sixth of the samples in text is worth
its lever; less is evidence only."""

_LEVERS: dict[str, tuple[str, ...]] = {
    TEXT: (
        "tokenise once ahead of training and store the token ids (a memory-mapped array or "
        "Arrow file), so each batch only reads them",
        "a fast tokenizer (Hugging Face tokenizers, written in Rust) called on a whole batch "
        "at once, not per sample in Python",
    ),
    IMAGE: (
        "decode smaller: store images pre-resized to the training size (or PIL's "
        "Image.draft for JPEG), and cache the decoded samples where memory allows",
        "augment on the GPU (torchvision.transforms.v2 on device tensors, DALI, kornia)",
    ),
    AUDIO: (
        "compute the audio features once ahead of training and store them",
        "compute spectrograms on the GPU (torchaudio transforms on device tensors)",
    ),
    NUMERIC: (
        "vectorise the per-sample numpy/pandas work (whole arrays, not rows), or do it on the "
        "GPU on the whole batch",
        "precompute what does not change between epochs and store it as arrays",
    ),
    READ: (
        "read fewer, larger files: shard the samples into tar/WebDataset or an Arrow/LMDB "
        "file; stage them on local NVMe",
        "store the data uncompressed (or decompress once ahead of training)",
    ),
    NETWORK: (
        "copy the data to local disk before training (or a local cache), so batches do not "
        "wait for the network",
        "more DataLoader workers overlap the waits: they wait rather than compute",
    ),
    SERIALISE: (
        "store samples in a format read without parsing (numpy memmap, Arrow, safetensors), "
        "not JSON or pickle per sample",
    ),
    COLLATE: (
        "return tensors from __getitem__ (not lists or dicts of Python numbers) so collating "
        "only stacks them, or read a batch at a time (a batch sampler)",
    ),
    LOGGING: ("log every N steps, or from a background thread",),
}
"""The levers for each kind of work, cheapest first, whatever the slice. The job's own Python
has none here: the cause names its function, and the slice's bound has the levers that hold
for any work (more workers, a cheaper batch, off the step)."""

_BY_SLICE: dict[tuple[str, str], tuple[str, ...]] = {
    (slices.CHECKPOINT, SERIALISE): (
        "save asynchronously: torch.distributed.checkpoint.async_save (or torch.save from a "
        "background thread on a CPU copy of the state dict)",
        "save the model and optimizer state only (no Python objects pickled beside them), "
        "less often",
    ),
    (slices.LOG, SERIALISE): ("write the metrics in a background thread, not per step",),
}
"""Where a slice wants its own lever for a kind (serialising a checkpoint is saved
asynchronously; serialising a sample is stored differently)."""


def kind_levers(kind: str, slice_name: str) -> tuple[Lever, ...]:
    """The levers for ``kind`` of work in ``slice_name``, saving from that slice."""
    texts = _BY_SLICE.get((slice_name, kind)) or _LEVERS.get(kind, ())
    return tuple(Lever(x, saves=slice_name) for x in texts)


def named_kinds(work: SliceWork) -> list[str]:
    """The kinds that hold at least NAMED of the samples, largest first."""
    return [k for k, share in work.kinds if share >= NAMED]


def frame_text(own: Frame, lib: Frame | None) -> str:
    """ "Sentences.__getitem__ (data.py:41) -> re/__init__.py:findall"."""
    at = f"{own.name} ({own.file}:{own.line})" if own.line else f"{own.name} ({own.file})"
    if lib is not None:
        return f"{at} -> {lib.file}:{lib.name}"
    return f"{at} at `{own.code}`" if own.code else at


def consumed(work: SliceWork) -> str:
    """One clause: "71% in Sentences.__getitem__ (data.py:41) -> re/__init__.py:findall: text
    normalising and tokenising"."""
    kind = work.kind
    what = KIND_NAMES[kind]
    top = next((a for a in work.at if a.kind == kind), None)
    if top is None:
        return f"{work.share(kind):.0%} {what}"
    said = f"{top.share:.0%} in {frame_text(top.own, top.lib)}: {what}"
    if top.share < work.share(kind) - 0.005:
        said += f" ({work.share(kind):.0%} in all)"
    also = [k for k in named_kinds(work) if k != kind]
    if kind == OWN and also:  # a library's work named beside the job's own Python
        said += "; " + ", ".join(f"{KIND_NAMES[k]} {work.share(k):.0%}" for k in also)
    return said


def work_evidence(who: str, work: SliceWork) -> tuple[Evidence, ...]:
    """The kinds and the functions, each with its share of the samples."""
    kinds = ", ".join(f"{KIND_NAMES[k]} {share:.0%}" for k, share in work.kinds)
    out = [Evidence(f"{who}: {kinds} of {work.samples} stack samples", "stacks")]
    out += [Evidence(f"{who}: {a.share:.0%} in {frame_text(a.own, a.lib)}", "stacks")
            for a in work.at]  # fmt: skip
    return tuple(out)


def levers_for(work: SliceWork | None, slice_name: str) -> tuple[Lever, ...]:
    """The levers of every kind named in ``work``, in the order of their shares (none when
    nothing was sampled: a lever for a kind no frame shows is never offered)."""
    if work is None:
        return ()
    out: list[Lever] = []
    for kind in named_kinds(work) or [work.kind]:
        out += [x for x in kind_levers(kind, slice_name) if x not in out]
    return tuple(out)
