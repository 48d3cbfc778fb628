"""What loading the agent needs to know about a process, read from /proc: its interpreter (the
path it was started as, its version, its flags), its user, environment and working directory,
whether it already has an agent, and whether this process may ptrace it.

The parsers are pure functions of the files' text (unit-tested); ``read_process`` does the I/O.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gputop.agent.paths import serves_agent
from gputop.sources.agent_sockets import candidates
from gputop.sources.procfs import parse_environ, parse_stat

CAP_SYS_PTRACE = 19
_VERSION = re.compile(r"(?:^|/)(?:lib)?python(\d)\.(\d+)")
_FLAGS_WITH_VALUE = frozenset("XWQ")
"""Interpreter options that take the next argument (-X opt, -W arg, -Q arg on old Pythons)."""


@dataclass(frozen=True)
class InjectTarget:
    """One process gputop may load its agent into: what the plan checks and the loaders use."""

    pid: int
    exe: str
    """The interpreter binary (/proc/PID/exe resolved)."""
    path: str
    """The interpreter as the process was started (a venv's bin/python, not the binary it links
    to): what runs the import check and what ``-m pip install`` must be run with."""
    version: tuple[int, int] | None
    flags: tuple[str, ...]
    """Interpreter options before the script, -c or -m (-S, -I, -E, -X ...)."""
    uid: int
    gid: int
    state: str
    """/proc/PID/stat state letter: T is stopped (job control), t traced."""
    environ: Mapping[str, str] = field(default_factory=dict)
    cwd: str = "/"
    cmdline: tuple[str, ...] = ()

    def has_agent(self, proc: str = "/proc") -> bool:
        """This process serves its agent: on its socket in its runtime dir, ours, or the
        fallback its agent took when those were another user's (the kernel's list of bound
        sockets finds it). A stale file, or a socket someone else serves under its name, does
        not count (checked as the monitor checks: owner, mode, the server's credentials)."""
        found = candidates(self.pid, self.environ, self.uid, proc)
        return any(serves_agent(p, self.pid, self.uid) for p in found)

    @property
    def label(self) -> str:
        v = f"{self.version[0]}.{self.version[1]}" if self.version else "?"
        return f"pid {self.pid} (Python {v})"


def version_of(exe: str, maps: str = "") -> tuple[int, int] | None:
    """The Python version from the binary's name (python3.11) or, for a binary named otherwise,
    the libpython it maps (libpython3.11.so)."""
    m = _VERSION.search(exe)
    if m:
        return int(m.group(1)), int(m.group(2))
    for line in maps.splitlines():
        m = _VERSION.search(line.rsplit(" ", 1)[-1])
        if m and "libpython" in line:
            return int(m.group(1)), int(m.group(2))
    return None


def is_python(exe: str, maps: str = "") -> bool:
    return version_of(exe, maps) is not None or os.path.basename(exe).startswith("python")


def interpreter_flags(argv: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The interpreter's own options in a command line: everything after argv[0] up to the
    script, ``-c`` or ``-m`` (their values and what follows belong to the program)."""
    out: list[str] = []
    i = 1
    while i < len(argv):
        a = argv[i]
        if not a.startswith("-") or a in ("-", "--") or a.startswith("--"):
            break
        letters = a[1:]
        if letters[:1] in ("c", "m"):
            break
        stop = False
        for j, ch in enumerate(letters):
            if ch in ("c", "m"):
                out.append("-" + letters[:j])
                stop = True
                break
            if ch in _FLAGS_WITH_VALUE:
                if j + 1 < len(letters):  # -Xdev
                    out.append(a)
                else:
                    out += [a, argv[i + 1]] if i + 1 < len(argv) else [a]
                    i += 1
                break
        else:
            out.append(a)
        if stop:
            break
        i += 1
    return tuple(out)


def started_as(argv0: str, exe: str, environ: Mapping[str, str], cwd: str) -> str:
    """The interpreter path the process computed for itself from argv[0] (PATH lookup, relative
    to its cwd), when it is the same binary as ``exe``; else ``exe``. A venv is known by that
    path, not by the binary it links to."""
    if argv0:
        candidates: list[str] = []
        if "/" in argv0:
            candidates.append(argv0 if argv0.startswith("/") else os.path.join(cwd, argv0))
        else:
            candidates += [os.path.join(d, argv0) for d in environ.get("PATH", "").split(":") if d]
        for c in candidates:
            try:
                if os.path.realpath(c) == exe and os.access(c, os.X_OK):
                    return os.path.normpath(c)
            except OSError:
                continue
    return exe


def remote_debug_disabled(environ: Mapping[str, str], flags: tuple[str, ...]) -> bool:
    """PEP 768's opt-outs visible from outside (a build without it shows only when asked)."""
    if environ.get("PYTHON_DISABLE_REMOTE_DEBUG"):
        return True
    return any(f == "disable_remote_debug" or f in ("-Xdisable_remote_debug",) for f in flags)


def read_process(pid: int, proc: str = "/proc") -> InjectTarget | None:
    """The facts of ``pid`` (None once it is gone). Fields this user may not read stay empty."""
    base = f"{proc}/{pid}"
    try:
        with open(f"{base}/stat") as f:
            st = parse_stat(f.read())
        info = os.stat(base)
    except (OSError, ValueError):
        return None
    try:
        exe = os.path.realpath(os.readlink(f"{base}/exe"))
    except OSError:
        exe = ""
    try:
        with open(f"{base}/maps") as f:
            maps = f.read()
    except OSError:
        maps = ""
    try:
        with open(f"{base}/environ", "rb") as f:
            environ = parse_environ(f.read())
    except OSError:
        environ = {}
    try:
        cwd = os.readlink(f"{base}/cwd")
    except OSError:
        cwd = "/"
    try:
        with open(f"{base}/cmdline", "rb") as f:
            argv = tuple(a.decode(errors="replace") for a in f.read().split(b"\0") if a)
    except OSError:
        argv = ()
    gid = info.st_gid
    try:
        with open(f"{base}/status") as f:
            for line in f:
                if line.startswith("Gid:"):
                    gid = int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return InjectTarget(
        pid=pid,
        exe=exe,
        path=started_as(argv[0] if argv else "", exe, environ, cwd) if exe else "",
        version=version_of(exe, maps),
        flags=interpreter_flags(argv),
        uid=info.st_uid,
        gid=gid,
        state=st.state,
        environ=environ,
        cwd=cwd,
        cmdline=argv,
    )


# ---- ptrace permission ----


def yama_scope(proc: str = "/proc") -> int:
    """/proc/sys/kernel/yama/ptrace_scope (0 when Yama is absent: classic ptrace rules)."""
    try:
        with open(f"{proc}/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def has_cap(status: str, cap: int = CAP_SYS_PTRACE) -> bool:
    """Whether a /proc/P/status text's effective capabilities include ``cap``."""
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> cap & 1)
    return False


def own_ptrace_cap(proc: str = "/proc") -> bool:
    try:
        with open(f"{proc}/self/status") as f:
            return has_cap(f.read())
    except OSError:
        return False


def is_ancestor_of(ancestor: int, pid: int, proc: str = "/proc") -> bool:
    seen = 0
    while pid > 1 and seen < 4096:
        if pid == ancestor:
            return True
        try:
            with open(f"{proc}/{pid}/stat") as f:
                pid = parse_stat(f.read()).ppid
        except (OSError, ValueError):
            return False
        seen += 1
    return False


def ptrace_refusal(
    target_uid: int,
    target_pid: int,
    euid: int,
    scope: int,
    cap: bool,
    descendant: bool,
) -> str | None:
    """Why this process may not ptrace the target (one line with what to do), or None.

    The kernel's rules: the same user, or CAP_SYS_PTRACE (root has it unless a container
    dropped it); Yama then narrows it (1: only one's descendants without the capability,
    2: only with the capability, 3: never)."""
    if scope >= 3:
        return (
            "ptrace is disabled on this machine (Yama ptrace_scope=3, until reboot): start the "
            "job under `gputop run` instead"
        )
    if target_uid != euid and not cap:
        if euid == 0:
            return (
                f"this container has no CAP_SYS_PTRACE and pid {target_pid} belongs to uid "
                f"{target_uid}: run gputop as that user, or start the container with "
                "--cap-add=SYS_PTRACE"
            )
        return (
            f"pid {target_pid} belongs to uid {target_uid}, not you: run gputop as that user "
            "or as root, or start the job with `gputop run`"
        )
    if scope == 2 and not cap:
        return (
            "ptrace needs CAP_SYS_PTRACE here (Yama ptrace_scope=2): run gputop as root, "
            "`sudo sysctl kernel.yama.ptrace_scope=0`, or start the job with `gputop run`"
        )
    if scope == 1 and not cap and not descendant:
        return (
            "ptrace is limited to a process's own children (Yama ptrace_scope=1): "
            "`sudo sysctl kernel.yama.ptrace_scope=0`, run gputop as root"
            + (", in a container add --cap-add=SYS_PTRACE" if euid == 0 else "")
            + ", or start the job with `gputop run`"
        )
    return None
