"""Where agent sockets live, and the checks that keep that place private. Stdlib only.

``$GPUTOP_DIR``, else ``$XDG_RUNTIME_DIR/gputop``, else ``/tmp/gputop-<uid>``. The directory is
created 0700 and verified before use (owned by us, no group or other access, not a symlink), so
another user cannot squat the path in /tmp or read our sockets.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

SOCKET_PREFIX = "agent-"
SOCKET_SUFFIX = ".sock"


class UnsafeDirectory(RuntimeError):
    """The socket directory is not ours alone: another user could squat it or read the sockets."""


def runtime_dir(environ: Mapping[str, str] = os.environ, uid: int | None = None) -> Path:
    uid = os.getuid() if uid is None else uid
    if environ.get("GPUTOP_DIR"):
        return Path(environ["GPUTOP_DIR"])
    if environ.get("XDG_RUNTIME_DIR"):
        return Path(environ["XDG_RUNTIME_DIR"]) / "gputop"
    return Path(f"/tmp/gputop-{uid}")


def socket_path(pid: int, directory: Path) -> Path:
    return directory / f"{SOCKET_PREFIX}{pid}{SOCKET_SUFFIX}"


def pid_of(path: Path) -> int | None:
    name = path.name
    if name.startswith(SOCKET_PREFIX) and name.endswith(SOCKET_SUFFIX):
        middle = name[len(SOCKET_PREFIX) : -len(SOCKET_SUFFIX)]
        return int(middle) if middle.isdigit() else None
    return None


def check_private(directory: Path, uid: int | None = None) -> None:
    """Raise UnsafeDirectory unless ``directory`` is ours alone (and not a symlink)."""
    uid = os.getuid() if uid is None else uid
    st = os.lstat(directory)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectory(f"{directory} is not a plain directory")
    if st.st_uid != uid:
        raise UnsafeDirectory(f"{directory} belongs to uid {st.st_uid}, not {uid}")
    if st.st_mode & 0o077:
        raise UnsafeDirectory(f"{directory} is open to other users (mode {st.st_mode & 0o777:o})")


def ensure_private_dir(directory: Path) -> Path:
    """Create (0700) if needed, then verify. Parents are created with the default mode."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    check_private(directory)
    return directory
