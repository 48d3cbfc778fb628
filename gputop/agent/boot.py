"""Starting the monitor's own copy of the agent inside a job that does not have gputop.

gputop is installed once, in its own environment; a job runs in another (a venv, a conda env, a
container, another Python). So the agent travels as code: gputop writes its agent and the
names it shares (``vocab``) into a private folder the job can read, under a package name of
its own (``gputop_why_agent_<hash>``: it cannot clash with any gputop the job has installed),
and the job's main thread runs ``start`` from there (``gputop/inject/agent_copy.py`` writes
the folder and the few lines that call this). Standard library only, like the whole agent.

Attached, ``start`` imports every module of the copy at once, so nothing is read from the
folder later and the copy can be removed as soon as the agent runs: nothing stays in the job's
file system. Started with the job (``gputop run``), the folder stays until the job ends, and
every Python process of the job imports only what it uses, as from an installed package.
The copy is also made the process's ``gputop.agent`` unless one is there already, so a
script's own markers (``import gputop.agent as gt``) reach the agent that runs.
"""

from __future__ import annotations

import importlib
import pkgutil
import shutil
import sys


def _import_all(root: str) -> object:
    """Every module of the copy's ``agent`` and ``vocab`` packages; returns ``root.agent``."""
    agent = importlib.import_module(f"{root}.agent")
    for package in (f"{root}.vocab", f"{root}.agent"):
        module = importlib.import_module(package)
        for info in pkgutil.iter_modules(module.__path__):
            importlib.import_module(f"{package}.{info.name}")
    return agent


def start(directory: str, attached: bool) -> bool:
    """Load and start the agent of this copy. ``attached``: loaded into a running process by
    ``gputop --pid`` (it goes idle when its last monitor leaves, and the copy is removed at
    once); else started with the job by ``gputop run`` (the folder stays for the job's other
    processes; gputop removes it when the job ends). Returns whether it records."""
    root = __name__.rsplit(".", 2)[0]
    if attached:
        agent = _import_all(root)  # a failure leaves the folder: the caller says why in it
        remove(directory)
    else:  # the folder stays while the job runs: the rest is imported when needed, as usual
        agent = importlib.import_module(f"{root}.agent")
    if root != "gputop" and "gputop.agent" not in sys.modules:
        sys.modules["gputop.agent"] = agent  # type: ignore[assignment]
    if attached:
        return bool(agent.autostart())  # type: ignore[attr-defined]
    return bool(agent.init())  # type: ignore[attr-defined]


def remove(directory: str) -> None:
    """The copy's folder and everything in it (bytecode the import wrote included)."""
    shutil.rmtree(directory, ignore_errors=True)
