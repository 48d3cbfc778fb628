"""Where agent sockets live, and the checks that keep that place private. Stdlib only.

``$GPUTOP_DIR``, else ``$XDG_RUNTIME_DIR/gputop``, else ``/tmp/gputop-<uid>``. The directory is
created 0700 and verified before use (owned by us, no group or other access, not a symlink), so
another user cannot read our sockets. One who took the path first (created it before us) gets
no socket there: the agent serves from a fresh ``mkdtemp`` directory instead (``serving_dir``),
which monitors find through the kernel's list of bound sockets (``bound_agent_sockets``).
Where a socket was found is only a hint: a monitor trusts it after ``open_private_dir`` and the
server's kernel credentials say it is the target's.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
import tempfile
from collections.abc import Mapping
from pathlib import Path

SOCKET_PREFIX = "agent-"
SOCKET_SUFFIX = ".sock"
MAX_NET_UNIX = 16 << 20
"""Bytes of /proc/PID/net/unix read at most (a host with ~150k sockets)."""
_LISTENING = 0x10000
"""__SO_ACCEPTCON in /proc/net/unix's Flags column: a listening socket."""


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


def serving_dir(directory: Path) -> tuple[Path, str | None]:
    """``directory`` made private, or, when it cannot be (another user created it first, a
    file is in the way), a fresh private directory from ``mkdtemp`` (random name, created 0700
    in one step, so it cannot be taken in advance) and why the first one was not used."""
    try:
        return ensure_private_dir(directory), None
    except UnsafeDirectory as e:
        why = str(e)
    except OSError as e:
        why = f"{directory}: {e.strerror or type(e).__name__}"
    fallback = Path(tempfile.mkdtemp(prefix=f"gputop-{os.getuid()}-"))
    check_private(fallback)
    return fallback, why


def open_private_dir(directory: Path, uid: int) -> int:
    """An fd of ``directory`` once it is shown to be ``uid``'s alone (owner, no group or other
    access, not a symlink), checked on the open fd so it cannot be swapped after the check.
    Raises UnsafeDirectory, or OSError (FileNotFoundError: gone)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if os.path.islink(directory):
            raise UnsafeDirectory(f"{directory} is a symlink") from None
        if isinstance(e, NotADirectoryError):
            raise UnsafeDirectory(f"{directory} is not a plain directory") from None
        raise
    st = os.fstat(fd)
    why = None
    if st.st_uid != uid:
        why = f"{directory} belongs to uid {st.st_uid}, not {uid}"
    elif st.st_mode & 0o077:
        why = f"{directory} is open to other users (mode {st.st_mode & 0o777:o})"
    if why is not None:
        os.close(fd)
        raise UnsafeDirectory(why)
    return fd


def bound_agent_sockets(pid: int, proc_root: str = "/proc") -> dict[int, list[Path]]:
    """pid -> paths of listening sockets named ``agent-<pid>.sock`` in ``pid``'s network
    namespace, from the kernel's list (/proc/PID/net/unix): how a monitor finds an agent that
    serves from a fallback directory. Anyone can bind such a name (and a path may contain a
    newline to fake a line), so each is a candidate to check, never a proof."""
    found: dict[int, list[Path]] = {}
    try:
        with open(f"{proc_root}/{pid}/net/unix", "rb") as f:
            raw = f.read(MAX_NET_UNIX)
    except OSError:
        return found
    for line in raw.splitlines():
        if SOCKET_SUFFIX.encode() not in line:
            continue
        parts = line.split(None, 7)
        if len(parts) < 8 or not parts[7].startswith(b"/"):
            continue
        try:
            if not int(parts[3], 16) & _LISTENING:
                continue
            path = Path(os.fsdecode(parts[7]))
        except ValueError:
            continue
        owner = pid_of(path)
        if owner is not None and len(found) < 4096:
            found.setdefault(owner, []).append(path)
    return found


def peer_credentials(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a connected Unix socket, as the kernel
    recorded them (SO_PEERCRED: for a server, whoever called listen); None if unreadable."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid, uid


def connect_private(path: Path, uid: int, timeout: float = 0.5) -> socket.socket:
    """A connection to the socket at ``path``, made through its directory once that is shown to
    be ``uid``'s alone (``open_private_dir``: checked on the open fd, so no component can be
    swapped between the check and the connect). Raises UnsafeDirectory, or OSError (nobody
    serves there: a stale file, a full queue; gone)."""
    dfd = open_private_dir(path.parent, uid)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(f"/proc/self/fd/{dfd}/{path.name}")
    except OSError:
        s.close()
        raise
    finally:
        os.close(dfd)
    return s


def serves_agent(path: Path, pid: int, uid: int) -> bool:
    """Whether ``pid`` (running as ``uid``) itself listens on ``path``, in a directory that is
    ``uid``'s alone: what "this process has an agent" means. A socket another process serves
    under the name, or a stale file of a process that died, does not count."""
    try:
        s = connect_private(path, uid)
    except (OSError, UnsafeDirectory):
        return False
    with s:
        return peer_credentials(s) == (pid, uid)
