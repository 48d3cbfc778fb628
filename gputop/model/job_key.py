"""Which job a run is, the same across its runs: what the job's memory files a run under and
what a before/after compares with.

A job is its script (the absolute path its main process ran, or ``-m`` module's file, which is
what Python puts in ``sys.argv[0]``) and its world size: a change of a knob on the command
line (``--num-workers 4``) is the same job run differently, and the comparison names the
arguments that changed. The arguments are kept without the volatile ones, which differ
between runs of the same job and say nothing of its pace: seeds, ports, where it writes
(output, checkpoint and log folders, run names), temporary paths and time stamps. Pure.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

ALWAYS = frozenset({"seed", "port", "timestamp", "out", "output", "outdir", "logdir", "savedir",
                    "key", "token", "password", "passwd", "secret", "auth", "credential",
                    "credentials"})  # fmt: skip
"""Words of an option's name that make its value volatile by themselves (a secret's too: the
memory keeps no credential, whatever a job was given on its command line)."""
KINDS = frozenset(
    {"save", "ckpt", "checkpoint", "log", "logging", "run", "experiment", "exp", "wandb",
     "tensorboard", "project", "root", "cache"}
)  # fmt: skip
"""Words that make it volatile with a word of WHERE: ``--log-dir``, ``--run-name``, but not
``--log-every`` (a knob of the logging slice)."""
WHERE = frozenset({"dir", "path", "file", "name", "id", "prefix", "to"})
HIDDEN = "*"
"""What a volatile value is replaced by (the option's name is kept)."""
STAMP = re.compile(r"(19|20)\d{6}[-_T.]?\d{4,6}|\b[0-9a-f]{12,}\b")
"""A date-time stamp or a long hexadecimal id inside a value."""
TOKEN = re.compile(r"^[A-Za-z0-9_\-]{24,}$")
"""A value shaped like an access token (``hf_...``, ``sk-...``): hidden when it mixes letters
and digits."""
TEMP = ("/tmp/", "/var/tmp/", "/dev/shm/")
ARGS_MOST = 64
"""Arguments kept (the agent sends at most 64 of ``sys.argv``)."""


@dataclass(frozen=True, slots=True)
class JobKey:
    """A job as its runs share it (the module docstring)."""

    script: str
    """The script's absolute path, "-c", or what else ``sys.argv[0]`` was."""
    world_size: int
    args: tuple[str, ...]
    """The arguments without volatile values (HIDDEN in their place)."""

    @property
    def id(self) -> str:
        """The job's file name in the memory: its script and world size, hashed."""
        text = f"{self.script}\0{self.world_size}"
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]

    @property
    def title(self) -> str:
        """How a listing names it: the script's file name, its arguments, its world size."""
        name = posixpath.basename(self.script) or self.script
        ranks = f" ({self.world_size} ranks)" if self.world_size > 1 else ""
        return " ".join((name, *self.args))[:200] + ranks


def _words(option: str) -> set[str]:
    return set(re.split(r"[^a-z0-9]+", option.lstrip("-").lower())) - {""}


def volatile_option(option: str) -> bool:
    """An option whose value differs between runs of one job (module docstring)."""
    words = _words(option)
    return bool(words & ALWAYS) or bool(words & KINDS and words & WHERE)


def volatile_value(value: str) -> bool:
    """A value that is a temporary path, carries a time stamp or a long id, or looks like a
    token."""
    if value.startswith(TEMP) or STAMP.search(value.lower()) is not None:
        return True
    digits = sum(c.isdigit() for c in value)
    return TOKEN.match(value) is not None and digits >= 4 and sum(c.isalpha() for c in value) >= 4


def stable_args(args: Sequence[str]) -> tuple[str, ...]:
    """``args`` with every volatile value HIDDEN, the options' names kept."""
    out: list[str] = []
    hide_next = False
    for a in list(args)[:ARGS_MOST]:
        option = is_option(a)
        if option:
            name, eq, value = a.partition("=")
            hide = volatile_option(name)
            out.append(f"{name}={HIDDEN}" if eq and (hide or volatile_value(value)) else a)
            hide_next = hide and not eq
        else:
            out.append(HIDDEN if hide_next or volatile_value(a) else a)
            hide_next = False
    return tuple(out)


def is_option(a: str) -> bool:
    """An option's name (``--lr``, ``-v``, ``--lr=0.1``), not a negative number."""
    if not a.startswith("-") or len(a) < 2:
        return False
    try:
        float(a)
    except ValueError:
        return True
    return False


def job_key(argv: Sequence[str], cwd: str | None, world_size: int | None) -> JobKey | None:
    """The job of a process that ran ``argv`` from ``cwd`` (None: no argv to go by)."""
    if not argv or not argv[0]:
        return None
    first = argv[0]
    script = first
    if first != "-c" and cwd and not posixpath.isabs(first):
        script = posixpath.join(cwd, first)
    if script != "-c":
        script = posixpath.normpath(script)
    return JobKey(script, max(1, world_size or 1), stable_args(argv[1:]))
