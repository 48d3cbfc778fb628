"""Which GPUs gputop shows and judges: ``--only 0,3`` (indices or UUIDs, as nvitop's --only and
CUDA_VISIBLE_DEVICES write them) or ``--only-visible`` (this shell's CUDA_VISIBLE_DEVICES).

Pure: the NVML source applies the choice once its devices are known. An index is NVML's (the
PCI bus order nvidia-smi shows); CUDA numbers devices fastest first unless
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so an index from CUDA_VISIBLE_DEVICES names the same GPU only
under that setting (or on a board of identical GPUs, where both orders are the bus order):
a UUID is exact everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop.errors import BadUsage
from gputop.model.gpu import DeviceInfo

MAX_CHOICES = 64
"""More GPUs than any node has: a longer list is a mistake, said as one."""


class NoSuchGpu(BadUsage):
    """A GPU the user named that this machine does not have (one line, exit status 2)."""

    when = "--only or CUDA_VISIBLE_DEVICES names a GPU this machine does not have"


@dataclass(frozen=True)
class GpuChoice:
    """What the user asked for: the words as written and where they came from."""

    words: tuple[str, ...]
    origin: str
    """``--only`` or ``CUDA_VISIBLE_DEVICES`` (said in errors)."""


def parse_only(text: str) -> GpuChoice:
    """``--only``'s value: indices and UUIDs separated by commas (or spaces). ValueError with
    the reason for an empty list or a word that is neither."""
    words = tuple(w for w in text.replace(",", " ").split() if w)
    if not words:
        raise ValueError("--only needs at least one GPU: an index (0) or a UUID (GPU-...)")
    if len(words) > MAX_CHOICES:
        raise ValueError(f"--only names {len(words)} GPUs; a node has at most {MAX_CHOICES}")
    for w in words:
        if not (w.isdigit() or w.upper().startswith(("GPU-", "MIG-"))):
            raise ValueError(f"--only {w!r}: a GPU is an index (0) or a UUID (GPU-...)")
    return GpuChoice(words, "--only")


def visible_devices(environ: Mapping[str, str]) -> GpuChoice | None:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: None when unset (every GPU); the entries up to the
    first one CUDA would stop at (an invalid entry hides it and all after it; ``-1`` or empty
    hides every GPU)."""
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    words: list[str] = []
    for w in raw.split(",")[:MAX_CHOICES]:
        w = w.strip()
        if not (w.isdigit() or w.upper().startswith(("GPU-", "MIG-"))):
            break
        words.append(w)
    return GpuChoice(tuple(words), "CUDA_VISIBLE_DEVICES")


def chosen(devices: Sequence[DeviceInfo], choice: GpuChoice | None) -> tuple[int, ...]:
    """The NVML indices of ``devices`` that ``choice`` names, in index order (every one for
    None). NoSuchGpu for a word that names none, or a UUID prefix that names more than one."""
    if choice is None:
        return tuple(d.index for d in devices)
    have = ", ".join(str(d.index) for d in devices) or "none"
    keep: set[int] = set()
    for w in choice.words:
        if w.isdigit():
            hits = [d for d in devices if d.index == int(w)]
            why = f"no GPU {w} on this machine (its GPUs: {have})"
        elif w.upper().startswith("MIG-"):
            raise NoSuchGpu(
                f"{choice.origin} {w}: a MIG instance; gputop shows whole GPUs: name the GPU "
                "it is on (its index or GPU- UUID)"
            )
        else:
            hits = [d for d in devices if d.uuid and d.uuid.lower().startswith(w.lower())]
            why = f"no GPU's UUID starts with {w} (`nvidia-smi -L` lists them)"
            if len(hits) > 1:
                why = f"{w} starts the UUIDs of GPUs {', '.join(str(d.index) for d in hits)}"
                raise NoSuchGpu(f"{choice.origin} {why}: give more of it")
        if not hits:
            raise NoSuchGpu(f"{choice.origin} {w}: {why}")
        keep.update(d.index for d in hits)
    return tuple(d.index for d in devices if d.index in keep)


def order_note(choice: GpuChoice | None, environ: Mapping[str, str]) -> str | None:
    """One line when CUDA_VISIBLE_DEVICES's indices may name other GPUs than NVML's do."""
    if choice is None or choice.origin != "CUDA_VISIBLE_DEVICES":
        return None
    if environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or not any(
        w.isdigit() for w in choice.words
    ):
        return None
    return (
        "CUDA_VISIBLE_DEVICES gives indices and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA may "
        "number the GPUs otherwise than NVML (fastest first); UUIDs are exact"
    )
