"""Loading the agent into a running process: the parts that run anywhere (the injected code, the
debugger's script, the 3.14 script and helper, the choice of path from the target's version,
the refusal lines). The real debugger path: tests/integration/test_inject.py."""

from __future__ import annotations

import ast
import sys
from unittest.mock import ANY

import pytest

from gputop.capture.external import ToolRun
from gputop.inject import debugger as dbg
from gputop.inject import remote
from gputop.inject.agent_copy import load_code
from gputop.inject.plan import NO_DEBUGGER, LoadPlan, LoadReport, ProcessLoad, choose_method
from gputop.inject.target import (
    has_cap,
    interpreter_flags,
    ptrace_refusal,
    remote_debug_disabled,
    version_of,
)

GDB = ("gdb", "/usr/bin/gdb")


CODE = load_code("/tmp/gputop-agent-0123/", "gputop_why_agent_0123")


def test_the_injected_code_runs_apart_from_the_job_and_binds_nothing(tmp_path, capsys):
    tree = ast.parse(CODE)
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Try)
    handler = tree.body[0].handlers[0]
    assert isinstance(handler.type, ast.Name) and handler.type.id == "BaseException"
    assert handler.name is None  # not even the exception is bound in the job's __main__
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    job_globals: dict = {"d": "the job's own d", "m": 1, "sys": None}
    exec(load_code(str(tmp_path), "gputop_why_agent_missing"), job_globals)
    assert job_globals == {"d": "the job's own d", "m": 1, "sys": None, "__builtins__": ANY}
    # the failure is said on the job's stderr and left where gputop looks
    assert "the agent did not start (ModuleNotFoundError" in capsys.readouterr().err
    assert (tmp_path / "failed").read_text().startswith("ModuleNotFoundError: ")


def test_the_injected_code_never_raises_into_the_target(tmp_path, capsys):
    folder = tmp_path / "copy"
    (folder / "gputop_why_agent_boom" / "agent").mkdir(parents=True)
    (folder / "gputop_why_agent_boom" / "__init__.py").write_text("")
    (folder / "gputop_why_agent_boom" / "agent" / "__init__.py").write_text("")
    (folder / "gputop_why_agent_boom" / "agent" / "boot.py").write_text(
        "def start(d, attached):\n    raise SystemExit(3)\n"  # would end the job if it escaped
    )
    exec(load_code(str(folder), "gputop_why_agent_boom"), {})
    assert "the agent did not start (SystemExit: 3)" in capsys.readouterr().err
    assert str(folder) not in sys.path


@pytest.mark.parametrize("text", [CODE, 'a "quoted" \\ back\tslash é\n'])
def test_c_literals_read_back_byte_for_byte(text):
    lit = dbg.c_literal(text)
    assert "\n" not in lit and "\t" not in lit
    back = ast.literal_eval("b" + lit.replace("\\'", "'"))  # C escapes are Python's here
    assert back.decode() == text


def test_the_gdb_script_maps_a_page_queues_the_call_and_always_detaches():
    script = dbg.gdb_script(CODE)
    lines = script.splitlines()
    assert "malloc" not in script  # the stopped thread may hold malloc's lock
    assert any("mmap(0, 4096" in ln for ln in lines)
    queue = next(i for i, ln in enumerate(lines) if "Py_AddPendingCall((void *) PyRun" in ln)
    assert lines[-1] == "quit" and lines[-2] == "detach" and queue < len(lines) - 2
    size = len(CODE.encode()) + 1
    assert size < dbg.PAGE
    assert f"set {{char[{size}]}} $gputop_page = " in script
    argv = dbg.gdb_argv("/usr/bin/gdb", 42, "/tmp/x.gdb")
    assert argv[:6] == ["/usr/bin/gdb", "-batch", "-nx", "-nw", "-p", "42"]
    assert "set debuginfod enabled off" in argv and not any("sysroot" in a for a in argv)
    boxed = dbg.gdb_argv("/usr/bin/gdb", 42, "/tmp/x.gdb", "/proc/42/root")
    assert "set sysroot /proc/42/root" in boxed  # a container's own libc and libpython


def test_the_lldb_command_does_the_same_and_detaches():
    argv = dbg.lldb_argv("/usr/bin/lldb", 42, CODE)
    assert argv[argv.index("-p") + 1] == "42" and argv[-1] == "process detach"
    exprs = [a for a in argv if a.startswith("expr -- ")]
    assert "mmap" in exprs[0] and "Py_AddPendingCall" in exprs[3]
    assert "$gputop_add)($gputop_run, (void *)$gputop_page)" in exprs[-1]
    assert not any("malloc" in e for e in exprs)


def test_lldb_output_becomes_the_same_lines():
    attach = (
        "* thread #1, name = 'python', stop reason = signal SIGSTOP\n"
        "    frame #0: 0x00007f8c2688f503 libc.so.6`__GI___clock_nanosleep(clock_id=1) at x.c:71\n"
        "(lldb) expr -- char *$gputop_page = ...\n(long) $0 = 140000\n"
    )
    ok = dbg.parse_run(_run(attach + "(int) $1 = 0\nProcess 7 detached\n"), 7)
    assert ok.queued and dbg.in_c_call(ok.main_in) == "clock_nanosleep"  # as gdb names it
    full = dbg.parse_run(_run(attach + "(int) $1 = -1\n", rc=0), 7)
    assert not full.queued and "queue of pending calls is full" in full.problem
    not_py = dbg.parse_run(
        _run(err="error: <user expression 2>:1:30: use of undeclared identifier "
             "'PyRun_SimpleString'", rc=1), 7
    )  # fmt: skip
    assert "does not look like CPython" in not_py.problem


def _run(out: str = "", err: str = "", rc: int | None = 0, **kw) -> ToolRun:
    return ToolRun(rc, out, err, kw.get("timed_out", False), False, kw.get("not_found", False))


def test_debugger_output_becomes_one_line():
    ok = dbg.parse_run(
        _run("GPUTOP: attached\nGPUTOP: main thread in \nclock_nanosleep + 35 in section .text "
             "of /lib/x86_64-linux-gnu/libc.so.6\nGPUTOP: python\nGPUTOP: queued 0\n"), 7
    )  # fmt: skip
    assert ok.queued and ok.problem is None
    assert dbg.in_c_call(ok.main_in) == "clock_nanosleep"
    in_py = "_PyEval_EvalFrameDefault + 3 in section .text of /usr/lib/libpython3.11.so.1.0"
    assert dbg.in_c_call(in_py) is None
    denied = dbg.parse_run(_run(err="ptrace: Operation not permitted.", rc=1), 7)
    assert not denied.queued and denied.problem.startswith("ptrace denied for pid 7: run")
    full = dbg.parse_run(_run("GPUTOP: attached\nGPUTOP: python\nGPUTOP: queued -1\n", rc=0), 7)
    assert "queue of pending calls is full" in full.problem
    not_py = dbg.parse_run(_run('GPUTOP: attached\nNo symbol "Py_AddPendingCall"', rc=1), 7)
    assert "does not look like CPython" in not_py.problem
    slow = dbg.parse_run(_run(rc=None, timed_out=True), 7)
    assert "did not finish" in slow.problem
    for r in (denied, full, not_py, slow):
        assert "\n" not in r.problem


def test_the_version_comes_from_the_binary_or_the_libpython_it_maps():
    assert version_of("/usr/bin/python3.11") == (3, 11)
    assert version_of("/root/.pyenv/versions/3.14.0/bin/python3.14") == (3, 14)
    maps = "7f00-7f01 r-xp 0 08:01 5 /usr/lib/libpython3.14.so.1.0\n"
    assert version_of("/opt/conda/bin/trainer", maps) == (3, 14)
    assert version_of("/usr/bin/bash", "7f00 r-xp /lib/libc.so.6") is None


def test_interpreter_flags_stop_at_the_program():
    assert interpreter_flags(["python", "-S", "-X", "dev", "train.py", "-S"]) == (
        "-S", "-X", "dev")  # fmt: skip
    assert interpreter_flags(["python", "-u", "-m", "torch.distributed.run"]) == ("-u",)
    assert interpreter_flags(["python", "-Ic", "print()"]) == ("-I",)
    assert interpreter_flags(["python", "-Xdisable_remote_debug", "t.py"]) == (
        "-Xdisable_remote_debug",)  # fmt: skip
    assert interpreter_flags(["python"]) == ()


def test_the_path_is_chosen_from_the_version_and_the_opt_outs():
    assert choose_method((3, 14), {}, (), GDB) == "remote_exec"
    assert choose_method((3, 15), {}, (), None) == "remote_exec"
    assert choose_method((3, 11), {}, (), GDB) == "gdb"
    assert choose_method((3, 13), {}, (), ("lldb", "/usr/bin/lldb")) == "lldb"
    assert choose_method((3, 11), {}, (), None) is None
    opted_out = {"PYTHON_DISABLE_REMOTE_DEBUG": "1"}
    assert choose_method((3, 14), opted_out, (), GDB) == "gdb"
    assert choose_method((3, 14), {}, ("-X", "disable_remote_debug"), None) is None
    assert remote_debug_disabled({}, ("-Xdisable_remote_debug",))


def test_the_314_helper_runs_the_targets_interpreter_in_its_namespaces():
    argv = remote.helper_argv("/venv/bin/python3.14", 42, "/tmp/s.py")
    assert argv[:3] == ["/venv/bin/python3.14", "-I", "-c"] and argv[-2:] == ["42", "/tmp/s.py"]
    ast.parse(remote.HELPER)
    boxed = remote.helper_argv("/usr/bin/python3.14", 7, "/tmp/s.py", remote.nsenter(4242))
    assert boxed[:6] == ["nsenter", "--target", "4242", "--mount", "--pid", "--"]
    assert boxed[-2:] == ["7", "/tmp/s.py"]  # the PID as the container knows it


def test_remote_exec_failures_become_one_line():
    ok = remote.explain(_run(rc=0), 7)
    assert ok.scheduled
    refused = remote.explain(
        _run(err="RuntimeError: Remote debugging is not enabled in the remote process", rc=1), 7
    )
    assert refused.refused and "PYTHON_DISABLE_REMOTE_DEBUG" in refused.problem
    denied = remote.explain(_run(err="PermissionError: [Errno 1] Operation not permitted", rc=1), 7)
    assert "ptrace" in denied.problem
    other = remote.explain(_run(err="Traceback...\nOSError: something odd", rc=1), 7)
    assert other.problem == "sys.remote_exec failed: OSError: something odd"


def test_ptrace_refusals_say_which_rule_and_how_to_allow_it():
    assert ptrace_refusal(1000, 5, 1000, 0, False, False) is None
    assert ptrace_refusal(1000, 5, 0, 0, True, False) is None
    other = ptrace_refusal(1001, 5, 1000, 0, False, False)
    assert "belongs to uid 1001" in other and "as that user or as root" in other
    assert "start the job with `gputop run`" in other  # a way that needs no ptrace at all
    container = ptrace_refusal(1001, 5, 0, 0, False, False)
    assert "CAP_SYS_PTRACE" in container and "--cap-add=SYS_PTRACE" in container
    yama1 = ptrace_refusal(1000, 5, 1000, 1, False, False)
    assert "ptrace_scope=1" in yama1 and "sysctl kernel.yama.ptrace_scope=0" in yama1
    assert ptrace_refusal(1000, 5, 1000, 1, False, True) is None  # our own child
    assert "ptrace_scope=2" in ptrace_refusal(1000, 5, 1000, 2, False, False)
    assert "ptrace_scope=3" in ptrace_refusal(0, 5, 0, 3, True, False)
    assert has_cap("CapEff:\t000001fffeffffff\n") and not has_cap("CapEff:\t0000000000000000\n")


def test_the_plan_says_what_it_does_and_needs_and_each_refusal_in_one_line():
    plan = LoadPlan(
        10,
        (
            ProcessLoad(10, None, "gdb", None, has_agent=True),
            ProcessLoad(11, None, None, NO_DEBUGGER),
        ),
        None,
    )
    assert not plan.todo and not plan.nothing_to_do
    assert plan.summary() == NO_DEBUGGER
    assert plan.lines() == [
        "pid 10 already has gputop's agent: nothing to do",
        f"pid 11: {NO_DEBUGGER}",
    ]
    done = LoadPlan(10, (ProcessLoad(10, None, "gdb", None, has_agent=True),), GDB)
    assert done.nothing_to_do and "nothing to do" in done.summary()
    shell_only = ProcessLoad(10, None, refusal="not a Python process", python=False)
    shell = LoadPlan(10, (shell_only,), GDB)
    assert shell.nothing_to_do and shell.summary().startswith("not a Python process")
    report = LoadReport((10,), (), ("pid 11's main thread is inside a C call (read): ...",))
    assert not report.ok and report.line().startswith("agent loaded into pid 10; pid 11")


def test_lldb_comes_first_on_a_cpu_with_amx_state(tmp_path):
    """gdb cannot write the AMX tile state back after its call (gdb 13.1, Linux 6.18: every
    call fails), lldb can: with both installed, lldb is taken there, gdb elsewhere."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("gdb", "lldb"):
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    amx, plain = tmp_path / "amx", tmp_path / "plain"
    amx.write_text("processor\t: 0\nflags\t\t: fpu avx512f amx_bf16 amx_tile amx_int8\n")
    plain.write_text("processor\t: 0\nflags\t\t: fpu sse avx2\n")
    assert dbg.find_debugger(str(bin_dir), str(amx)) == ("lldb", str(bin_dir / "lldb"))
    assert dbg.find_debugger(str(bin_dir), str(plain)) == ("gdb", str(bin_dir / "gdb"))
    assert dbg.find_debugger(str(bin_dir), str(tmp_path / "none")) == ("gdb", str(bin_dir / "gdb"))
    (bin_dir / "lldb").unlink()
    assert dbg.find_debugger(str(bin_dir), str(amx)) == ("gdb", str(bin_dir / "gdb"))


def test_gdbs_extended_state_failure_says_to_install_lldb():
    run = ToolRun(1, "Couldn't write extended state status: Bad address.\n", "", False, False)
    problem = dbg.parse_run(run, 42).problem
    assert problem is not None and "install lldb (apt-get install lldb)" in problem
