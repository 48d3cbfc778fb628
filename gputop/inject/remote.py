"""Loading the agent on Python 3.14 and newer: ``sys.remote_exec(pid, script_path)`` (PEP 768,
"Remote debugging attachment protocol" in the CPython HOWTOs).

The caller must run the same major.minor version as the target, so the call is made by the
target's own interpreter in a short helper process (an argv list, its own process group, a
timeout), whatever Python gputop itself runs on. The target reads the script file at its next
safe point on its main thread, so the file must be readable by the target's user; the script
removes itself first, gputop removes it after its wait in any case, and the agent's socket
appearing tells gputop it ran. The target can
refuse: ``PYTHON_DISABLE_REMOTE_DEBUG``, ``-X disable_remote_debug``, a build
``--without-remote-debug``; the plan then takes the debugger path when a debugger is present.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass

from gputop.capture.external import ToolRun, run_tool

TIMEOUT_S = 15.0

HELPER = (
    "import sys\n"
    "try:\n"
    "    sys.remote_exec(int(sys.argv[1]), sys.argv[2])\n"
    "except Exception as e:\n"
    "    print(f'{type(e).__name__}: {e}', file=sys.stderr)\n"
    "    sys.exit(1)\n"
)
"""Run by the target's interpreter (-I: nothing of the environment changes what it does)."""


def script(path: str) -> str:
    """The file the target runs: remove itself (nothing is left on disk), then import gputop's
    agent and start it; never raises into the target."""
    return (
        "try:\n"
        f"    __import__('os').unlink({path!r})\n"
        f"    __import__('os').rmdir({os.path.dirname(path)!r})\n"
        "except OSError:\n"
        "    pass\n"
        "try:\n"
        "    __import__('gputop.agent').agent.autostart()\n"
        "except BaseException as e:\n"
        "    try:\n"
        "        __import__('sys').stderr.write('gputop: the agent did not start: %r\\n' % (e,))\n"
        "    except BaseException:\n"
        "        pass\n"
    )


def helper_argv(interpreter: str, pid: int, path: str) -> list[str]:
    return [interpreter, "-I", "-c", HELPER, str(pid), path]


def write_script(uid: int, gid: int) -> str:
    """The script in a fresh private directory the target's user owns (0700, file 0600)."""
    directory = tempfile.mkdtemp(prefix="gputop-load-")
    path = os.path.join(directory, "load_agent.py")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(script(path))
    if os.geteuid() == 0 and uid != 0:
        os.chown(path, uid, gid)
        os.chown(directory, uid, gid)
    return path


def remove_script(path: str) -> None:
    """What the target did not remove (it never reached a safe point, or refused)."""
    for remove, p in ((os.unlink, path), (os.rmdir, os.path.dirname(path))):
        with contextlib.suppress(OSError):
            remove(p)


@dataclass(frozen=True)
class RemoteRun:
    """How ``sys.remote_exec`` went: the script is scheduled, or one line saying why not."""

    scheduled: bool
    problem: str | None
    refused: bool = False
    """The target refuses remote execution (disabled by its environment, flags or build)."""


def explain(run: ToolRun, pid: int) -> RemoteRun:
    if run.returncode == 0 and not run.timed_out:
        return RemoteRun(True, None)
    text = (run.stderr_tail or "").strip()
    last = text.splitlines()[-1] if text else ""
    low = text.lower()
    if run.not_found:
        return RemoteRun(False, "the target's interpreter could not be started")
    if run.timed_out:
        return RemoteRun(False, f"sys.remote_exec did not return within {TIMEOUT_S:g} s")
    if "not enabled" in low or "disabled" in low or ("remote debug" in low and "support" in low):
        return RemoteRun(
            False,
            f"pid {pid} refuses remote execution (PYTHON_DISABLE_REMOTE_DEBUG, "
            "-X disable_remote_debug or a build without it): restart it without, or use gdb "
            "(apt-get install gdb)",
            refused=True,
        )
    if "permission" in low or "operation not permitted" in low:
        return RemoteRun(
            False, f"not allowed to attach to pid {pid} (ptrace): run gputop as its user or root"
        )
    if "no such process" in low:
        return RemoteRun(False, f"pid {pid} has exited")
    return RemoteRun(False, f"sys.remote_exec failed: {last[:160] or 'no output'}")


def run_remote_exec(interpreter: str, pid: int, uid: int, gid: int) -> tuple[RemoteRun, str]:
    """Schedule the script in ``pid``; returns how it went and the script's path (removed by
    the target when it runs; ``remove_script`` after the wait removes what is left)."""
    path = write_script(uid, gid)
    run = run_tool(helper_argv(interpreter, pid, path), TIMEOUT_S)
    result = explain(run, pid)
    if not result.scheduled:
        remove_script(path)
    return result, path
