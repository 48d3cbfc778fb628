"""The agent as self-contained code: a private copy of gputop's own agent, written where a job
can read it, whatever environment, Python or container the job runs in.

gputop is installed once, in its own environment; a job never has to have it. What runs in the
job is the monitor's own agent (standard library only): ``gputop/agent`` and the names it
shares (``gputop/vocab``), copied under a package name of their own (``gputop_why_agent_`` and
a hash of the code: a job that has another gputop installed keeps it, untouched), into a fresh
folder:

- attaching (``--attach``, key ``a``): in the target's own mount namespace (its ``/tmp``, or
  ``$TMPDIR``, reached through ``/proc/PID/root``: a container's files, not the host's),
  created 0700, written through held descriptors (``O_NOFOLLOW``, ``O_EXCL``: a planted link
  or a folder swapped by another user is never followed), owned by the target's user once
  complete. The target's main thread runs ``load_code``: it imports the copy, which removes
  its folder as soon as it is loaded (``agent/boot.py``); one that fails leaves a line in the
  folder saying why, which gputop reads and then removes the folder;
- ``gputop run`` and ``diagnose -- CMD``: in gputop's private runtime folder, first on the
  job's PYTHONPATH with a ``sitecustomize.py`` (``inject/run_site.py``), for every Python
  process of the job, until the job ends. gputop's own site-packages never is: its libraries
  would shadow the job's.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gputop
from gputop.agent.paths import runtime_dir, serving_dir
from gputop.model.shown import printable
from gputop.vocab.stacks import AGENT_PACKAGE_PREFIX

FOLDER_PREFIX = "gputop-agent-"
FAILED = "failed"
"""What a copy that could not start leaves in its folder: one line (``failed-<pid>`` in the
folder a ``gputop run`` job's processes share)."""
SITE = "sitecustomize.py"
SCRIPT = "load_agent.py"
"""In an attached target's copy: ``load_code`` as a file, for ``sys.remote_exec`` (3.14+)."""
PACKAGES = ("agent", "vocab")
"""The parts of gputop that travel: the agent and the names it shares (standard library only,
checked for every supported Python by CI)."""
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
"""Where in the target's file system the copy may go, after its own $TMPDIR."""
MAX_LINE = 512
"""Bytes of a failure line read at most (the folder is the target's: anything may be there)."""
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class CopyError(RuntimeError):
    """The copy cannot be written where the target can read it: one line saying why."""


@functools.cache
def contents() -> tuple[str, dict[str, bytes]]:
    """The copy's package name and its files (path in the package -> bytes). The name carries
    a hash of the code, so two builds never share a name, and the job's own gputop (any
    version) is a different package altogether."""
    root = Path(gputop.__file__).resolve().parent
    files: dict[str, bytes] = {}
    for package in PACKAGES:
        for path in sorted((root / package).glob("*.py")):
            files[f"{package}/{path.name}"] = path.read_bytes()
    digest = hashlib.sha256()
    for name, data in sorted(files.items()):
        digest.update(name.encode() + b"\0" + data + b"\0")
    files["__init__.py"] = (
        f'"""The agent of gputop-why {gputop.__version__}, copied into this job by gputop."""\n\n'
        f"__version__ = {gputop.__version__!r}\n"
    ).encode()
    return AGENT_PACKAGE_PREFIX + digest.hexdigest()[:12], files


def site_code() -> bytes:
    """The ``sitecustomize.py`` of a ``gputop run`` job's copy."""
    return (Path(__file__).resolve().parent / "run_site.py").read_bytes()


def load_code(folder: str, package: str) -> str:
    """What an attached target's main thread runs (through the debugger or sys.remote_exec):
    import the copy from ``folder`` (as the target names it) and start it; on any failure, the
    reason in the folder and on the job's stderr. Never raises into the job, binds no name in
    its ``__main__`` (the work runs in a namespace of its own), and leaves its ``sys.path`` as
    it was. Under 1 KiB: the debugger's page is 4 KiB."""
    inner = (
        f"d={folder!r}\n"
        "import sys\n"
        "try:\n"
        " sys.path.insert(0,d)\n"
        " try:m=__import__(" + repr(package + ".agent.boot") + ",fromlist=['start'])\n"
        " finally:\n"
        "  try:sys.path.remove(d)\n"
        "  except ValueError:pass\n"
        "  sys.path_importer_cache.pop(d,None)\n"
        " m.start(d,True)\n"
        "except BaseException as e:\n"
        " w=('%s: %s'%(type(e).__name__,e)).replace('\\n',' ')[:300]\n"
        " try:\n"
        "  import os\n"
        f"  f=os.open(d+'/{FAILED}',{_NEW & ~os.O_CLOEXEC},0o600)\n"
        "  os.write(f,(w+'\\n').encode('utf-8','replace'));os.close(f)\n"
        " except BaseException:pass\n"
        " sys.stderr.write('gputop: the agent did not start (%s)\\n'%w)\n"
    )
    return (
        "try:__import__('builtins').exec(" + repr(inner) + ",{'__name__':'gputop_load'})\n"
        "except BaseException:pass\n"
    )


@dataclass
class AgentCopy:
    """One written copy: where the target finds it, and a held descriptor of the folder it is
    in, through which gputop reads its failure line and removes it (never by a path looked up
    again)."""

    package: str
    folder: str
    """The copy's folder as the target names it (in its own mount namespace)."""
    base_fd: int
    name: str
    """The folder's name in its parent (held by ``base_fd``)."""

    def failures(self) -> dict[int | None, str]:
        """Why the agent did not start, by pid (None: the one process an attach loads), each a
        line as the copy wrote it, cleaned of control characters."""
        out: dict[int | None, str] = {}
        try:
            fd = os.open(self.name, _DIR, dir_fd=self.base_fd)
        except OSError:
            return out
        try:
            for entry in os.scandir(fd):
                if entry.name != FAILED and not entry.name.startswith(FAILED + "-"):
                    continue
                pid_text = entry.name[len(FAILED) + 1 :]
                line = _read_line(fd, entry.name)
                if line is not None and (pid_text.isdigit() or not pid_text):
                    out[int(pid_text) if pid_text else None] = line
                if len(out) >= 64:
                    break
        finally:
            os.close(fd)
        return out

    def present(self) -> bool:
        try:
            os.stat(self.name, dir_fd=self.base_fd, follow_symlinks=False)
        except OSError:
            return False
        return True

    def remove(self) -> None:
        """The folder and whatever is in it (bytecode, a failure line), through descriptors:
        a link planted inside is removed, never followed."""
        with contextlib.suppress(OSError):
            _remove_at(self.base_fd, self.name)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.base_fd)


def _read_line(dir_fd: int, name: str) -> str | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)  # fmt: skip
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.read(fd, MAX_LINE)
    except OSError:
        return None
    finally:
        os.close(fd)
    text = raw.decode("utf-8", "replace").split("\n", 1)[0]
    return printable(text, MAX_LINE).strip() or "no reason given"


def _remove_at(parent: int, name: str, depth: int = 0) -> None:
    fd = os.open(name, _DIR, dir_fd=parent)
    try:
        for entry in list(os.scandir(fd)):
            if entry.is_dir(follow_symlinks=False) and depth < 8:
                _remove_at(fd, entry.name, depth + 1)
            else:
                os.unlink(entry.name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


def _write(folder_fd: int, files: dict[str, bytes], owner: tuple[int, int] | None) -> None:
    """Every file under the held folder (subfolders made as needed), then, when gputop runs as
    root for another user's job, everything handed to that user: files first, folder last, so
    nothing is the target user's before it is complete."""
    made: dict[str, int] = {"": folder_fd}
    handed: list[int] = []
    try:
        for rel, data in sorted(files.items()):
            sub, _, leaf = rel.rpartition("/")
            if sub not in made:
                os.mkdir(sub, 0o700, dir_fd=folder_fd)
                made[sub] = os.open(sub, _DIR, dir_fd=folder_fd)
            fd = os.open(leaf, _NEW, 0o600, dir_fd=made[sub])
            try:
                os.write(fd, data)
                if owner:
                    os.fchown(fd, *owner)
            finally:
                os.close(fd)
        if owner:
            handed = [fd for sub, fd in made.items() if sub]
            for fd in [*handed, folder_fd]:
                os.fchown(fd, *owner)
    finally:
        for sub, fd in made.items():
            if sub:
                os.close(fd)


def _new_folder(
    base_fd: int, files: Callable[[str], dict[str, bytes]], owner: tuple[int, int] | None
) -> str:
    """A fresh folder (random name, 0700, made by us: checked on the open descriptor) under
    ``base_fd`` with ``files(its name)`` in it; its name."""
    name = FOLDER_PREFIX + secrets.token_hex(8)
    os.mkdir(name, 0o700, dir_fd=base_fd)
    fd = os.open(name, _DIR, dir_fd=base_fd)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
            raise CopyError(f"the folder made for the agent's copy is not private ({name})")
        _write(fd, files(name), owner)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            _remove_at(base_fd, name)
        raise
    os.close(fd)
    return name


def _open_in_root(root_fd: int, path: str) -> int:
    """``path`` (absolute, in the target's view) under its root, one component at a time, no
    link followed: a held O_PATH descriptor."""
    fd = os.dup(root_fd)
    try:
        for part in [p for p in path.split("/") if p]:
            if part in (".", ".."):
                raise CopyError(f"{path}: not a plain path")
            nxt = os.open(part, _PATH, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def usable_base(st: os.stat_result, uid: int) -> str | None:
    """Why a folder may not hold the copy (None: it may): it must be a folder owned by root or
    the target's user, and one that others can write must be sticky (/tmp is), so that nobody
    else can rename or replace what is made in it."""
    if not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    if st.st_uid not in (0, uid):
        return f"it belongs to uid {st.st_uid}"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return "others can write it and it is not sticky"
    return None


def place_for(
    pid: int, uid: int, gid: int, environ: dict[str, str] | None = None, proc: str = "/proc"
) -> AgentCopy:
    """The copy for process ``pid`` (running as ``uid``), in its own mount namespace: its
    $TMPDIR, else the first usable of ``TEMP_DIRS``. Raises CopyError (one line)."""
    package, files = contents()
    try:
        root_fd = os.open(f"{proc}/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CopyError("it has exited") from None
    except OSError as e:
        raise CopyError(f"cannot reach its file system (/proc/{pid}/root): {e.strerror}") from None
    tmpdir = (environ or {}).get("TMPDIR", "")
    bases = ([tmpdir] if tmpdir.startswith("/") else []) + [d for d in TEMP_DIRS if d != tmpdir]
    owner = (uid, gid) if os.geteuid() == 0 and uid != 0 else None
    why: list[str] = []
    try:
        for base in bases:
            try:
                base_fd = _open_in_root(root_fd, base)
            except (OSError, CopyError) as e:
                why.append(f"{base}: {getattr(e, 'strerror', None) or e}")
                continue
            problem = usable_base(os.fstat(base_fd), uid)
            if problem is None:
                try:
                    name = _new_folder(base_fd, attach_layout(base, package, files), owner)
                except OSError as e:
                    problem = e.strerror or type(e).__name__
                else:
                    return AgentCopy(package, f"{base.rstrip('/')}/{name}", base_fd, name)
            why.append(f"{base}: {problem}")
            os.close(base_fd)
    finally:
        os.close(root_fd)
    raise CopyError(f"no folder in its file system to put the agent in ({'; '.join(why)})")


def place_for_run() -> AgentCopy:
    """The copy for a job ``gputop run`` starts (this user, this mount namespace): in gputop's
    private runtime folder, with the ``sitecustomize.py`` that starts it in every Python
    process of the job. Raises CopyError."""
    package, files = contents()
    base = serving_dir(runtime_dir())[0]
    try:
        base_fd = os.open(base, _DIR)
        layout = {**files_under(package, files), SITE: site_code()}
        name = _new_folder(base_fd, lambda _name: layout, None)
    except OSError as e:
        raise CopyError(f"cannot write the agent's copy in {base}: {e.strerror}") from None
    return AgentCopy(package, str(base / name), base_fd, name)


def attach_layout(
    base: str, package: str, files: dict[str, bytes]
) -> Callable[[str], dict[str, bytes]]:
    """An attached target's copy, for a folder ``name`` under ``base``: the package and the
    script ``sys.remote_exec`` runs (``load_code`` naming that folder)."""

    def layout(name: str) -> dict[str, bytes]:
        script = load_code(f"{base.rstrip('/')}/{name}", package).encode()
        return {**files_under(package, files), SCRIPT: script}

    return layout


def files_under(package: str, files: dict[str, bytes]) -> dict[str, bytes]:
    """The copy's files as they lie in its folder: all under the package's own name."""
    return {f"{package}/{rel}": data for rel, data in files.items()}
