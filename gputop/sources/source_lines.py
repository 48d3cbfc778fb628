"""One line of a job's own source file, for the innermost frame of a thread in its own code:
the line that made the C call the thread is in (a compiled pattern's ``findall``,
``unicodedata.normalize``, ``np.frombuffer``) names the kind of work a stack alone cannot
(``model/frame_kinds.py``). Read through ``/proc/PID/root`` (a container's files as it sees
them). The file is the job's, so it may be anything: a regular file only (never a FIFO, which
would block), opened without following a final symlink, read bounded, the line made one
printable line; each (pid, file, line) read once."""

from __future__ import annotations

import os
import stat
from functools import lru_cache

from gputop.model.shown import printable

MAX_BYTES = 1 << 20
"""Bytes of a source file read at most: a line past the first MiB is not read."""
MAX_LINE = 160
"""Characters of a line kept."""
CACHED = 4096


@lru_cache(maxsize=CACHED)
def code_line(pid: int, path: str, line: int) -> str:
    """The text of ``line`` (1-based) of ``path`` as process ``pid`` sees it, stripped; ""
    when it cannot be read (gone, not a regular file, too far in, no permission)."""
    if line < 1 or not path.startswith("/") or "\x00" in path:
        return ""
    try:
        fd = os.open(f"/proc/{pid}/root{path}",
                     os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)  # fmt: skip
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        data = os.pread(fd, MAX_BYTES, 0)
    except OSError:
        return ""
    finally:
        os.close(fd)
    lines = data.split(b"\n", line)
    if len(lines) <= line and not data.endswith(b"\n") and len(data) >= MAX_BYTES:
        return ""  # the line may run past what was read
    text = lines[line - 1] if len(lines) >= line else b""
    return printable(text.decode("utf-8", "replace").strip(), MAX_LINE)
