"""Loading the agent through a debugger (Pythons before 3.14), the way ``memray attach`` does:
the debugger never runs Python itself. It stops the process for a moment, asks the interpreter
to run a pending call (``Py_AddPendingCall``: the main thread runs it at its next safe point,
between two bytecodes, holding the GIL), and detaches at once.

In the target, the debugger only:
1. maps one anonymous page (``mmap``: a system call, safe wherever the thread was stopped,
   unlike ``malloc`` whose lock the stopped thread may hold);
2. writes the code (``agent_copy.load_code``: import the agent's copy, start it) into it;
3. calls ``Py_AddPendingCall(PyRun_SimpleString, page)``, which only queues the call;
4. detaches (``gdb -batch`` detaches on every exit, an error in the script included).

The main thread then runs that code when it next executes Python: at once in a training loop;
if it is inside a long C call (a sleep, a blocking read), when that call returns. The code
never raises: a pending call that fails would surface as an error in the training code.
The page (4 KiB) stays mapped: freeing it would need a second stop.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass

from gputop.capture.external import ToolRun, run_tool

PAGE = 4096
"""The one page mapped in the target: the code it runs must fit (``agent_copy.load_code``,
under 1 KiB, imports the agent's copy and starts it)."""

TIMEOUT_S = 30.0
"""The debugger's whole run, symbol loading included; then it is stopped (and the target,
if the kernel left it stopped, continued)."""
MARK = "GPUTOP:"
PTRACE_DENIED = (
    "ptrace denied for pid {pid}: run gputop as the job's user or root; in a container add "
    "--cap-add=SYS_PTRACE (and a seccomp profile that allows ptrace)"
)

_MMAP = "(char *) mmap(0, 4096, 3, 0x22, -1, 0)"  # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS


def c_literal(text: str) -> str:
    """``text`` as a C string literal both gdb and lldb read back byte for byte."""
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out += [f"\\{b:03o}" for b in ch.encode()]
    return '"' + "".join(out) + '"'


def gdb_script(code: str) -> str:
    """The gdb commands; an error in any of them ends the script (then gdb detaches)."""
    size = len(code.encode()) + 1
    return (
        "\n".join(
            [
                "set pagination off",
                "set confirm off",
                "set width 0",
                "set unwindonsignal on",
                "sharedlibrary libc",
                "sharedlibrary libpython",
                f"echo {MARK} attached\\n",
                f"echo {MARK} main thread in \\n",
                "info symbol $pc",
                "p (void *) Py_AddPendingCall",
                "p (void *) PyRun_SimpleString",
                f"echo {MARK} python\\n",
                f"set $gputop_page = {_MMAP}",
                "if $gputop_page == (char *) -1",
                f"  echo {MARK} no page\\n",
                "  detach",
                "  quit 3",
                "end",
                f"set {{char[{size}]}} $gputop_page = {c_literal(code)}",
                "set $gputop_rc = (int) Py_AddPendingCall((void *) PyRun_SimpleString, "
                "(void *) $gputop_page)",
                f'printf "{MARK} queued %d\\n", $gputop_rc',
                "detach",
                "quit",
            ]
        )
        + "\n"
    )


def gdb_argv(gdb: str, pid: int, script: str, sysroot: str | None = None) -> list[str]:
    """``sysroot``: the target's own root (``/proc/PID/root``) when it runs in another mount
    namespace (a container): its libc and libpython are read from there, not the host's."""
    root = ["-iex", f"set sysroot {sysroot}"] if sysroot else []
    return [
        gdb, "-batch", "-nx", "-nw", "-p", str(pid),
        "-iex", "set debuginfod enabled off",
        "-iex", "set auto-solib-add off",  # only libc and libpython: big torch libraries cost
        *root,
        "-x", script,
    ]  # fmt: skip


def lldb_argv(lldb: str, pid: int, code: str) -> list[str]:
    """The same steps for lldb (where gdb is missing), one expression each; lldb's batch mode
    stops at the first that fails and detaches. Functions without debug information are called
    through explicit types, and function addresses go through variables (lldb cannot pass
    ``&function`` as an argument)."""
    size = len(code.encode()) + 1
    return [
        lldb, "--batch", "--no-lldbinit", "-p", str(pid),
        "-o", "expr -- char *$gputop_page = (char *)((char *(*)(void *, unsigned long, int, "
              "int, int, long))mmap)(0, 4096, 3, 0x22, -1, 0)",
        "-o", f"expr -- const char code[{size}] = {c_literal(code)}; "
              f"if ($gputop_page != (char *)-1) for (int i = 0; i < {size}; i++) "
              "$gputop_page[i] = code[i]; (long)$gputop_page",
        # cast to their C types: a stripped interpreter (Debian's /usr/bin/python3) has no
        # debug info for them, and lldb refuses a symbol of unknown type without one
        "-o", "expr -- void *$gputop_run = (void *)(int (*)(const char *))PyRun_SimpleString",
        "-o", "expr -- void *$gputop_add = "
              "(void *)(int (*)(int (*)(void *), void *))Py_AddPendingCall",
        "-o", "expr -- $gputop_page == (char *)-1 ? -2 : "
              "((int (*)(void *, void *))$gputop_add)($gputop_run, (void *)$gputop_page)",
        "-o", "process detach",
    ]  # fmt: skip


def has_amx(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU keeps AMX tile state (its flags name ``amx_tile``): gdb cannot write
    that extended state back after a call it makes in the target (measured: gdb 13.1 on Linux
    6.18, every call ends "Couldn't write extended state status: Bad address"), lldb 14 can."""
    try:
        with open(cpuinfo, "rb") as f:
            head = f.read(1 << 16)  # the first CPU's flags are near the start
    except OSError:
        return False
    return b" amx_tile" in head


def find_debugger(
    path: str | None = None, cpuinfo: str = "/proc/cpuinfo"
) -> tuple[str, str] | None:
    """("gdb", its path), else ("lldb", its path), else None; lldb first on a CPU with AMX
    state, which gdb cannot restore after its call (``has_amx``)."""
    order = ("lldb", "gdb") if has_amx(cpuinfo) else ("gdb", "lldb")
    for name in order:
        found = shutil.which(name, path=path)
        if found:
            return name, found
    return None


EXTENDED_STATE = "Couldn't write extended state"
"""gdb's words when it cannot restore the CPU's extended registers after its call (AMX)."""


@dataclass(frozen=True)
class DebuggerRun:
    """How the debugger's run went, read from its output: whether the call was queued, where
    the main thread was (a C function tells the agent waits for it to return), what failed."""

    queued: bool
    problem: str | None
    main_in: str | None
    """The function the main thread was stopped in, with the library it belongs to."""
    output: str


def parse_run(run: ToolRun, pid: int) -> DebuggerRun:
    text = (run.stdout or "") + "\n" + (run.stderr_tail or "")
    main_in = None
    m = re.search(rf"{MARK} main thread in \s*\n?(.*)", text)
    if m and not m.group(1).startswith("No symbol"):
        main_in = m.group(1).strip() or None
    m = re.search(r"frame #0: 0x[0-9a-f]+ ([^`\s]+)`(\w+)", text)  # lldb
    if main_in is None and m:
        main_in = f"{m.group(2)} in {m.group(1)}"
    lldb_rc = re.findall(r"^\(int\) \$\d+ = (-?\d+)\s*$", text, re.M)  # the last expression's
    queued = bool(re.search(rf"{MARK} queued 0\b", text)) or lldb_rc[-1:] == ["0"]
    if queued:
        return DebuggerRun(True, None, main_in, text)
    if run.not_found:
        return DebuggerRun(False, "the debugger could not be started", main_in, text)
    if run.timed_out:
        return DebuggerRun(
            False, f"the debugger did not finish within {TIMEOUT_S:g} s and was stopped",
            main_in, text,
        )  # fmt: skip
    if "ptrace:" in text or "Operation not permitted" in text or "attach failed" in text:
        return DebuggerRun(False, PTRACE_DENIED.format(pid=pid), None, text)
    if re.search(rf"{MARK} queued -1", text) or lldb_rc[-1:] == ["-1"]:
        return DebuggerRun(
            False, "the interpreter's queue of pending calls is full; try again", main_in, text
        )
    lldb_no_python = "undeclared identifier 'Py" in text or "undeclared identifier 'PyRun" in text
    if (f"{MARK} attached" in text and f"{MARK} python" not in text) or lldb_no_python:
        return DebuggerRun(
            False, f"pid {pid} does not look like CPython (no Py_AddPendingCall)", main_in, text
        )
    if EXTENDED_STATE in text:
        return DebuggerRun(
            False, "gdb cannot restore this CPU's extended (AMX) registers after its call: "
            "install lldb (apt-get install lldb), which gputop then uses", main_in, text,
        )  # fmt: skip
    last = next(
        (ln.strip() for ln in reversed(text.splitlines()) if ln.strip() and MARK not in ln), ""
    )
    return DebuggerRun(False, f"the debugger failed: {last[:160] or 'no output'}", main_in, text)


def in_c_call(main_in: str | None) -> str | None:
    """The C function the main thread was stopped in when it is outside the interpreter (libc,
    a library such as torch's), else None."""
    if not main_in:
        return None
    name = main_in.split()[0]
    if "python" in main_in.lower() or name.startswith(("Py", "_Py")):
        return None
    if name.startswith("__GI_"):  # glibc's internal alias, as lldb names it: the public name
        name = name.removeprefix("__GI_").lstrip("_")
    return name


def run_debugger(
    debugger: tuple[str, str],
    pid: int,
    code: str,
    sysroot: str | None = None,
    timeout: float = TIMEOUT_S,
) -> DebuggerRun:
    """Queue ``code`` in ``pid`` through the debugger, bounded in time; on every path the target
    ends up detached and running (a process the kernel left stopped is continued)."""
    if len(code.encode()) >= PAGE:
        return DebuggerRun(False, f"the code to run is over {PAGE} bytes", None, "")
    kind, path = debugger
    with tempfile.TemporaryDirectory(prefix="gputop-load-") as tmp:
        if kind == "gdb":
            script = os.path.join(tmp, "load.gdb")
            with open(script, "w") as f:
                f.write(gdb_script(code))
            argv = gdb_argv(path, pid, script, sysroot)
        else:
            argv = lldb_argv(path, pid, code)
        try:
            run = run_tool(argv, timeout)
        finally:
            keep_running(pid)
    return parse_run(run, pid)


def stopped(pid: int, proc: str = "/proc") -> bool:
    """Whether any thread of ``pid`` is stopped by a signal (T; t is a tracer's stop)."""
    try:
        tasks = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return False
    for tid in tasks:
        try:
            with open(f"{proc}/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        if text[text.rindex(")") + 2 :].split()[0] == "T":
            return True
    return False


def keep_running(pid: int, proc: str = "/proc") -> None:
    """After a debugger: a target left stopped (a debugger killed mid-way, lldb's known habit)
    is continued. Only called for targets that were running before."""
    for _ in range(3):
        if not stopped(pid, proc):
            return
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            return
        time.sleep(0.05)
