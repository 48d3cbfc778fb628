"""What consumes a slice's time: the stacks of the threads doing that work over the window,
grouped by the kind of work (``frame_kinds``) and by the job's own function that does it.

The data slice is made by the DataLoader workers' fetch (or, with no workers, the training
thread's own fetch); checkpointing, logging and evaluation by the main threads in those
phases. The method is the same for each: count the samples, group them. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from gputop.model.frame_kinds import OWN, kind_of
from gputop.model.roles import WORKER
from gputop.model.stack_stats import package, user_frame
from gputop.model.stacks import (
    AGENT,
    Frame,
    ProcessStacks,
    StacksSample,
    ThreadStack,
    reads,
)
from gputop.vocab.stacks import FETCH

MIN_SAMPLES = 5
"""Samples below which what consumes a slice is not said (one dump of four is 25%)."""
TOP = 3
"""Kinds and functions kept, largest first."""


class At(NamedTuple):
    """One function of the job's that does a slice's work, and the library frame under it."""

    kind: str
    own: Frame
    """The job's own innermost frame (``stack_stats.user_frame``)."""
    lib: Frame | None
    """The library frame that shows the kind (``re/__init__.py:findall``), None: its own."""
    share: float
    """Of the slice's samples."""


@dataclass(frozen=True)
class SliceWork:
    """Where the threads doing one slice's work spend it."""

    samples: int
    kinds: tuple[tuple[str, float], ...]
    """(kind, share of the samples), largest first (``frame_kinds.KIND_NAMES``)."""
    at: tuple[At, ...]
    """The functions, largest first: "Sentences.__getitem__ -> re.findall"."""

    def share(self, kind: str) -> float:
        return dict(self.kinds).get(kind, 0.0)

    @property
    def kind(self) -> str:
        """The kind most samples show (``OWN`` when none: the job's own Python)."""
        return self.kinds[0][0] if self.kinds else OWN


LETS_GO: frozenset[str] = frozenset({"torch"})
"""Libraries whose C calls let the GIL go (a torch op): where the agent's own samples land."""


def landed_on_release(t: ThreadStack) -> bool:
    """A sample the agent took where the thread let go of the GIL: its sampler needs the GIL,
    so it lands in the torch op after a stretch of pure Python (a collate after a tokenising
    ``__getitem__``) and says nothing of what the stretch did (ARCHITECTURE.md, the agent's
    stacks); py-spy's samples have no such bias."""
    return bool(t.frames) and package(t.frames[0]) in LETS_GO


Group = Callable[[ProcessStacks, ThreadStack], str | None]
"""Which group's work a thread of a process is doing now (None: none counted)."""


def slice_work(window: Sequence[StacksSample], group: Group) -> dict[str, SliceWork]:
    """Each group's samples over ``window`` (each read once, one pass for every group),
    grouped by kind and function; groups under MIN_SAMPLES are left out."""
    kinds: dict[str, Counter[str]] = {}
    at: dict[str, Counter[tuple[str, Frame | None, Frame | None]]] = {}
    for _, proc in reads(window):
        if proc.error:
            continue
        for t in proc.threads:
            name = group(proc, t)
            if name is None or (proc.via == AGENT and landed_on_release(t)):
                continue
            kind, shown = kind_of(t.frames)
            kinds.setdefault(name, Counter())[kind] += 1
            own = user_frame(t.frames)
            lib = shown if shown is not None and shown != own else None
            at.setdefault(name, Counter())[(kind, own, lib)] += 1
    out = {}
    for name, counts in kinds.items():
        n = sum(counts.values())
        if n >= MIN_SAMPLES:
            out[name] = SliceWork(
                n,
                tuple((k, c / n) for k, c in counts.most_common(TOP)),
                tuple(
                    At(kind, own, lib, c / n)
                    for (kind, own, lib), c in at[name].most_common(TOP)
                    if own is not None
                ),
            )
    return out


WORKERS = "workers"
"""The group of DataLoader workers making batches (``by_phase``)."""


def by_phase(phases: frozenset[str]) -> Group:
    """Main threads of the main process and ranks by their phase (those in ``phases``), and
    DataLoader workers' main threads making a batch as ``WORKERS``."""

    def group(proc: ProcessStacks, t: ThreadStack) -> str | None:
        if t.name != "MainThread":
            return None
        if proc.role == WORKER:
            return WORKERS if t.phase == FETCH else None
        return t.phase if t.phase in phases else None

    return group
