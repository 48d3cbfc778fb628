"""Loading the agent on Python 3.14 and newer: ``sys.remote_exec(pid, script_path)`` (PEP 768,
"Remote debugging attachment protocol" in the CPython HOWTOs).

The caller must run the same major.minor version as the target, so the call is made by the
target's own interpreter in a short helper process (an argv list, its own process group, a
timeout), whatever Python gputop itself runs on; for a target in a container, inside its mount
and PID namespaces (``nsenter``). The target reads the script file at its next safe point on
its main thread: the file lies in the agent's private copy, in the target's own file system and
owned by its user (``agent_copy.place_for``), and the copy removes itself once it has loaded.
The agent's socket appearing tells gputop it ran. The target can
refuse: ``PYTHON_DISABLE_REMOTE_DEBUG``, ``-X disable_remote_debug``, a build
``--without-remote-debug``; the plan then takes the debugger path when a debugger is present.
"""

from __future__ import annotations

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


def helper_argv(interpreter: str, pid: int, path: str, enter: tuple[str, ...] = ()) -> list[str]:
    """``enter``: for a target in another mount namespace (a container), the ``nsenter``
    prefix that runs the helper in its mount and PID namespaces (its interpreter, its libraries,
    its PID numbers: ``pid`` is then the PID there)."""
    return [*enter, interpreter, "-I", "-c", HELPER, str(pid), path]


def nsenter(pid: int) -> tuple[str, ...]:
    """The prefix that runs a command in ``pid``'s mount and PID namespaces."""
    return ("nsenter", "--target", str(pid), "--mount", "--pid", "--")


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


def run_remote_exec(
    interpreter: str, pid: int, script: str, ns_pid: int | None = None
) -> RemoteRun:
    """Schedule ``script`` (the agent's copy's ``load_agent.py``, as the target names it) in
    ``pid``. ``ns_pid``: the target's PID in its own namespace when that is not ours."""
    enter = nsenter(pid) if ns_pid is not None else ()
    argv = helper_argv(interpreter, ns_pid if ns_pid is not None else pid, script, enter)
    return explain(run_tool(argv, TIMEOUT_S), pid)
