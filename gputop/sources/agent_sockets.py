"""Where a process's agent socket may be, as seen from gputop, whatever namespaces the process
runs in.

An agent names its socket by its own PID (``agent-<pid>.sock``) in its own runtime folder.
A process in a container has its own PID namespace (the PID it knows itself by is the last of
the ``NSpid`` line in /proc/PID/status) and its own mount namespace (its /tmp is not the
host's: the host reaches it through ``/proc/PID/root``). The kernel's view of the socket's
server (SO_PEERCRED) is translated into gputop's namespace, so once connected the server is
checked against the host PID as for any other process (``agent.paths.serves_agent``).
Candidates are hints only, never proof: each is checked before it is trusted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from gputop.agent.paths import bound_agent_sockets, runtime_dir, socket_path
from gputop.sources.pidns import read_nspids


def own_pid(pid: int, proc: str = "/proc") -> int:
    """The PID ``pid`` knows itself by (in its own PID namespace)."""
    chain = read_nspids(pid, Path(proc))
    return chain[-1] if chain else pid


def root_of(pid: int, proc: str = "/proc") -> str:
    """``""`` when ``pid`` shares gputop's mount namespace; else the prefix through which its
    files are reached (``/proc/PID/root``). Unreadable namespaces count as shared."""
    try:
        mine = os.stat(f"{proc}/self/ns/mnt").st_ino
        theirs = os.stat(f"{proc}/{pid}/ns/mnt").st_ino
    except OSError:
        return ""
    return "" if mine == theirs else f"{proc}/{pid}/root"


def in_root(root: str, path: Path) -> Path:
    """``path`` as the process names it, reached from here."""
    return Path(root + str(path)) if root else path


def candidates(
    pid: int,
    environ: Mapping[str, str],
    uid: int,
    proc: str = "/proc",
    ours: Path | None = None,
    bound: Mapping[int, list[Path]] | None = None,
) -> list[Path]:
    """The paths (reachable from here) at which ``pid``'s agent may serve: its runtime folder
    by its own environment and user, ours (``ours``, when it shares our files), and what the
    kernel lists as bound under its name (``bound``: ``bound_agent_sockets`` of its network
    namespace, read by the caller once for many processes; read here when None)."""
    me = own_pid(pid, proc)
    root = root_of(pid, proc)
    dirs = [runtime_dir(environ, uid)]
    if not root:
        dirs.append(ours if ours is not None else runtime_dir())
    out = [in_root(root, socket_path(me, d)) for d in dirs]
    listed = bound if bound is not None else bound_agent_sockets(pid, proc)
    out += [in_root(root, p) for p in listed.get(me, [])]
    return list(dict.fromkeys(out))
