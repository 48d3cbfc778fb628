"""The job's memory on disk: a file per job in the user's state folder
(``$XDG_STATE_HOME/gputop/jobs``, else ``~/.local/state/gputop/jobs``), private to the user.

The folder is walked to and held as the capture root is (``capture/folder.open_root``: no
component swapped for a link, none another user may write), and every file is read and written
through its descriptor. A run is written whole to a temporary file of its own and renamed over
the job's file (a crash mid-write leaves the old file as it was, and the partial file is
removed at the next start). Bounded: RUNS_KEPT runs per job, JOBS_KEPT jobs (the longest
unwatched go first), FILE_MOST bytes read from any file. A file that is not as gputop writes
it is one line (``notes``) and is passed over, never a traceback. What a run keeps is its pace,
shares, settings, verdict and lever (``entry.py``): no environment, no command output.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from gputop.capture.folder import Folder, open_root
from gputop.diagnose import Remembered
from gputop.errors import GputopError
from gputop.history.entry import Damaged, file_doc, run_doc, runs_of
from gputop.model.job_key import JobKey

RUNS_KEPT = 20
"""Runs kept per job, the latest."""
JOBS_KEPT = 200
"""Jobs kept; past it, the job watched longest ago is forgotten."""
FILE_MOST = 256 * 1024
"""Bytes read from a file at most (20 runs take about 40 KB)."""
PARTIAL_AGE_S = 3600.0
"""A temporary file older than this was left by a crash: removed."""
SUFFIX = ".json"
FIX = (
    "set XDG_STATE_HOME to a folder only you can write, or turn the memory off (--no-history, "
    "or history = false in the config)"
)


def memory_root(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_STATE_HOME/gputop/jobs`` (an absolute path), else ``~/.local/state/gputop/jobs``."""
    state = environ.get("XDG_STATE_HOME", "")
    if not state.startswith("/"):
        state = os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return Path(state) / "gputop" / "jobs"


class Memory:
    """The jobs' memory, opened on first use. ``problem``: one line once it cannot be used (it
    then does nothing); ``notes``: one line per file passed over."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else memory_root()
        self.problem: str | None = None
        self.notes: list[str] = []
        self._folder: Folder | None = None

    def close(self) -> None:
        if self._folder is not None:
            self._folder.close()
            self._folder = None

    def _open(self) -> Folder | None:
        if self._folder is None and self.problem is None:
            try:
                fd = open_root(self.root, FIX, "memory folder")
            except (GputopError, OSError) as e:
                self.problem = f"the job memory is off: {e}"
                return None
            self._folder = Folder(self.root, fd)
            self._sweep(self._folder)
        return self._folder

    def _sweep(self, folder: Folder) -> None:
        """Temporary files a crash left behind."""
        now = time.time()
        for name in folder.names():
            if name.startswith(".") and name.endswith(".partial"):
                with contextlib.suppress(OSError):
                    st = os.stat(name, dir_fd=folder.fd, follow_symlinks=False)
                    if now - st.st_mtime > PARTIAL_AGE_S:
                        folder.remove(name)

    def _read(
        self, folder: Folder, name: str
    ) -> tuple[JobKey, list[tuple[str, Remembered]]] | None:
        """A job's file; None when there is none, or it is damaged (said once in ``notes``)."""
        try:
            data = folder.read_at_most(name, FILE_MOST)
        except FileNotFoundError:
            return None
        except OSError as e:
            self._note(f"{self.root / name} cannot be read ({e.strerror}): passed over")
            return None
        try:
            if data is None:
                raise Damaged(f"it is over {FILE_MOST // 1024} KiB")
            key, runs, damaged = runs_of(json.loads(data))
        except (Damaged, ValueError, RecursionError) as e:
            self._note(
                f"{self.root / name} is not a job memory file gputop wrote ({e}): passed over"
            )
            return None
        if damaged:
            self._note(f"{self.root / name}: {damaged} damaged run(s) passed over")
        return key, runs

    def _note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)

    def last(self, key: JobKey, besides: str = "") -> Remembered | None:
        """The job's latest run but ``besides`` (this session's own run id)."""
        folder = self._open()
        if folder is None:
            return None
        got = self._read(folder, key.id + SUFFIX)
        if got is None or got[0].script != key.script or got[0].world_size != key.world_size:
            return None
        runs = [r for rid, r in got[1] if rid != besides]
        return runs[-1] if runs else None

    def keep(self, run: Remembered, run_id: str) -> None:
        """This run as ``run_id`` (a later keep of the same id replaces it), written whole."""
        folder = self._open()
        if folder is None:
            return
        name = run.key.id + SUFFIX
        got = self._read(folder, name)
        fresh = got is None
        runs = [] if got is None else [(rid, r) for rid, r in got[1] if rid != run_id]
        runs.append((run_id, run))
        runs = sorted(runs, key=lambda x: x[1].started)[-RUNS_KEPT:]
        doc = file_doc(run.key, [run_doc(r, rid) for rid, r in runs])
        data = json.dumps(doc, separators=(",", ":")).encode()
        tmp = f".{name}.{os.getpid()}.{time.monotonic_ns()}.partial"
        try:
            fd = folder.create(tmp)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            folder.rename(tmp, name)
        except OSError as e:
            folder.remove(tmp)
            self.problem = f"the job memory stopped: {e.strerror or e} writing {self.root / name}"
            return
        if fresh:
            self._forget_oldest(folder)

    def _forget_oldest(self, folder: Folder) -> None:
        """Past JOBS_KEPT job files, the least recently written go."""
        files = []
        for name in folder.names():
            if name.endswith(SUFFIX) and not name.startswith("."):
                with contextlib.suppress(OSError):
                    files.append(
                        (os.stat(name, dir_fd=folder.fd, follow_symlinks=False).st_mtime, name)
                    )
        for _, name in sorted(files)[: max(0, len(files) - JOBS_KEPT)]:
            folder.remove(name)

    def jobs(self) -> list[tuple[JobKey, list[Remembered]]]:
        """Every job remembered with its runs (oldest first), the job watched last first."""
        folder = self._open()
        if folder is None:
            return []
        out = []
        for name in folder.names():
            if not name.endswith(SUFFIX) or name.startswith("."):
                continue
            got = self._read(folder, name)
            if got is not None and got[1]:
                out.append((got[0], [r for _, r in got[1]]))
        return sorted(out, key=lambda j: -j[1][-1].ended)

    def forget(self, key: JobKey) -> bool:
        """The job's file removed; whether there was one."""
        folder = self._open()
        if folder is None or folder.size(key.id + SUFFIX) is None:
            return False
        folder.remove(key.id + SUFFIX)
        return True
