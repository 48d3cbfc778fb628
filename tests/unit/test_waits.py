"""No test waits for a state with a fixed sleep: a sleep passes when things are merely slow and
fails on a busy machine. Every wait goes through ``tests_support.until`` (or ``until_drawn``
under Pilot); a sleep that paces something (a child's loop, the span a rate is measured over)
says so on its line with ``# pacing:``. The corpus and bench scripts and the GPU check are
programs that pace their jobs, not tests, and are not read."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PROGRAMS = ("bench", "corpus", "gpu/gpu_check.py", "gpu/nvml_phases.py")
"""Scripts under tests/ that pace jobs or measure them (their sleeps are their purpose)."""
POLLERS = {("tests_support.py", "until_or_none"), ("tests_support.py", "sample_until")}
"""The polling helpers themselves: their sleep is the interval between looks."""


def _sleeps(path: Path) -> list[tuple[int, str, str]]:
    """(line, enclosing function, the line's text) of each call to a ``sleep``."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = child.name
            if isinstance(child, ast.Call):
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name == "sleep":
                    found.append((child.lineno, function, lines[child.lineno - 1]))
            visit(child, inner)

    visit(ast.parse(source), "")
    return found


def test_every_sleep_in_the_tests_paces_something_and_says_what():
    unsaid = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel.startswith(PROGRAMS):
            continue
        for line, function, text in _sleeps(path):
            if (rel, function) in POLLERS or "# pacing:" in text:
                continue
            unsaid.append(f"tests/{rel}:{line}: {text.strip()}")
    assert not unsaid, "a sleep that waits for a state (use until) or paces unsaid:\n" + "\n".join(
        unsaid
    )


def test_the_scan_finds_a_sleep_and_its_function(tmp_path):
    probe = tmp_path / "t.py"
    probe.write_text(
        "import time\n\ndef wait():\n    time.sleep(1)\n\nasync def go(p):\n"
        "    await asyncio.sleep(0.1)  # pacing: one tick\n"
    )
    assert _sleeps(probe) == [
        (4, "wait", "    time.sleep(1)"),
        (7, "go", "    await asyncio.sleep(0.1)  # pacing: one tick"),
    ]
