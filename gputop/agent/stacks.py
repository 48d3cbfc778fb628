"""The agent's own stack samples: every Python thread of this process, read from the agent's
thread with ``sys._current_frames()``, named as py-spy names them (qualified function name,
package-relative file, line), so the monitor classifies them with the same rules and a stack
reads the same whichever of the two took it. No ptrace, no new process: a sample of a few
threads costs tens of microseconds (tests/bench/bench_agent.py measures it).

It needs the GIL, so a thread that holds it in a C call stops the samples (and the agent's
heartbeats): the monitor then reads that process with py-spy (``sources/stacks.py``), which
does not need it. The agent's own thread is left out (it is gputop's, not the job's).
"""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import threading
from types import CodeType
from typing import Any

from ..vocab.stacks import STACK_DEPTH, WAIT_FILES

MAX_CODE_LINE = 160
"""Characters of a source line sent with a thread's innermost frame."""


def _library_dirs() -> tuple[str, ...]:
    """The folders of Python's own library and installed packages: frames there are not the
    job's own code, and their source lines are not sent."""
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)}
    return tuple(sorted(p.rstrip("/") + "/" for p in found))


def own_line(path: str, line: int, libraries: tuple[str, ...]) -> str:
    """The source line of a frame in the job's own code (what C call the thread is in: the
    monitor reads the kind of work from it), "" for a library's or one that cannot be read."""
    if not path.startswith("/") or path.startswith(libraries) or "-packages/" in path:
        return ""
    try:
        text = linecache.getline(path, line)
    except (OSError, ValueError, MemoryError):
        return ""
    return "".join(c if c.isprintable() else "?" for c in text.strip()[:MAX_CODE_LINE])


MAX_CODES = 65536
"""Code objects whose names are kept; past this the table starts again (a job that makes
functions without end, such as one compiling lambdas per step, cannot grow it)."""


def short_filename(path: str) -> str:
    """py-spy's short name of a source file: the path below the outermost folder of the
    package that holds it (each folder up to there has an ``__init__.py``), so
    ``.../site-packages/torch/utils/data/dataloader.py`` is ``torch/utils/data/dataloader.py``
    and a script or a stdlib module is its base name."""
    if not path.startswith("/"):
        return path  # <string>, <frozen ...>: as Python names it
    parent = os.path.dirname(path)
    try:
        while parent != "/" and os.path.exists(os.path.join(parent, "__init__.py")):
            parent = os.path.dirname(parent)
    except OSError:
        return os.path.basename(path)
    return os.path.relpath(path, parent) if parent != "/" else path.lstrip("/")


def _state(tid: int) -> str:
    """A thread's scheduler state from /proc ('R' running or runnable), '' when unreadable."""
    try:
        fd = os.open(f"/proc/self/task/{tid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            text = os.read(fd, 1024)
        finally:
            os.close(fd)
    except OSError:
        return ""
    end = text.rfind(b")")
    return text[end + 2 : end + 3].decode() if end > 0 else ""


class StackSampler:
    """One sample of every thread but the caller's, as the wire's ``stacks`` message carries it."""

    def __init__(self) -> None:
        self._codes: dict[int, tuple[CodeType, str, str]] = {}
        """id(code) -> (code, name, file): a code object hashes its whole body, its id does
        not (the entry keeps the code alive, so its id is not reused while it is here)."""
        self._files: dict[str, str] = {}
        self._libraries = _library_dirs()

    def _name(self, code: CodeType) -> tuple[CodeType, str, str]:
        known = self._codes.get(id(code))
        if known is None:
            if len(self._codes) >= MAX_CODES:
                self._codes.clear()
            file = self._files.get(code.co_filename)
            if file is None:
                if len(self._files) >= MAX_CODES:
                    self._files.clear()
                file = self._files[code.co_filename] = short_filename(code.co_filename)
            name = getattr(code, "co_qualname", code.co_name)
            known = self._codes[id(code)] = (code, name, file)
        return known

    def sample(self) -> list[dict[str, Any]]:
        """Each thread: its OS thread id, name, whether it was running, and its frames
        innermost first, at most STACK_DEPTH. Frames are read first, states after (reading
        /proc lets go of the GIL, so a thread that was waiting for it shows as running); a
        thread whose innermost frame waits in the stdlib (a queue, an event, a socket) is idle
        without a read."""
        me = threading.get_ident()
        known = {t.ident: t for t in threading.enumerate()}
        frames = sys._current_frames()
        threads: list[dict[str, Any]] = []
        try:
            for ident, frame in frames.items():
                if ident == me:
                    continue
                stack: list[tuple[Any, ...]] = []
                f: Any = frame
                while f is not None and len(stack) < STACK_DEPTH:
                    _, name, file = self._name(f.f_code)
                    stack.append((name, file, f.f_lineno))
                    f = f.f_back
                if stack and frame.f_lineno:  # the innermost frame's line: the C call it is in
                    code = own_line(frame.f_code.co_filename, frame.f_lineno, self._libraries)
                    if code:
                        stack[0] = (*stack[0], code)
                t = known.get(ident)
                tid = getattr(t, "native_id", None) or 0
                threads.append({"tid": tid, "name": t.name if t else "?", "frames": stack})
        finally:
            del frames  # frames hold their locals alive: let them go now
        for info in threads:  # a thread waiting in the stdlib is idle: no /proc read for it
            waits = info["frames"] and info["frames"][0][1] in WAIT_FILES
            info["active"] = not waits and bool(info["tid"]) and _state(info["tid"]) == "R"
        return threads
