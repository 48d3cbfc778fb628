"""The layering, enforced: every import in the package (module level and inside functions)
against the contract of its layer. Sources -> pure model -> pure diagnosis -> session ->
outputs; nothing runs back up, and the agent, which runs inside the user's trainer, brings
nothing but the standard library (torch only inside functions, once training has it). Imports
under ``if TYPE_CHECKING:`` never run: they do not count.

A failure names the file, the line and the import, and the rule it breaks.
"""

from __future__ import annotations

import ast
import graphlib
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gputop"
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}
HEAVY = frozenset({"textual", "rich", "pynvml", "psutil", "subprocess", "plotext",
                   "prometheus_client", "torch"})  # fmt: skip
"""What a pure layer may not import: a screen, a driver, processes, exporters, torch."""
OUTPUTS = ("gputop.ui", "gputop.record", "gputop.export", "gputop.commands", "gputop.cli",
           "gputop.headless", "gputop.snapshot", "gputop.render", "gputop.capture",
           "gputop.inject", "gputop.fleet", "gputop.history", "gputop.arm")  # fmt: skip
ABOVE_MODEL = ("gputop.diagnose", "gputop.session", "gputop.followed_run", "gputop.sinks",
               "gputop.sources", "gputop.sim", "gputop.agent", "gputop.run",
               *OUTPUTS)  # fmt: skip


@dataclass(frozen=True)
class Import:
    module: str
    line: int
    lazy: bool
    """Inside a function: loaded only when that function runs."""
    names: tuple[str, ...] = ()
    """What ``from module import ...`` takes (a submodule among them is imported too)."""


def imports(path: Path, typed: bool = False) -> list[Import]:
    """Every import of a file, absolute (relative ones resolved against its package); with
    ``typed``, those under ``if TYPE_CHECKING:`` too."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    return imports_in(path.read_text(), package, str(path), typed)


def imports_in(
    source: str, package: str, filename: str = "<source>", typed: bool = False
) -> list[Import]:
    """Every import that can run in ``source``, a module of ``package``. Those under ``if
    TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) never do: only a type checker reads them,
    so they import nothing (an ``else:`` beside them does run); ``typed`` counts them too."""
    tree = ast.parse(source, filename)
    out: list[Import] = []

    def visit(nodes: Iterable[ast.AST], lazy: bool) -> None:
        for child in nodes:
            if isinstance(child, ast.If) and for_type_checkers(child.test) and not typed:
                visit(child.orelse, lazy)
                continue
            inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                out.extend(Import(a.name, child.lineno, lazy) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                out.append(Import(base, child.lineno, lazy, tuple(a.name for a in child.names)))
            visit(ast.iter_child_nodes(child), inner)

    visit(ast.iter_child_nodes(tree), False)
    return out


def for_type_checkers(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``: false whenever the code runs."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return (
        isinstance(test, ast.Attribute)
        and test.attr == "TYPE_CHECKING"
        and isinstance(test.value, ast.Name)
        and test.value.id in ("typing", "typing_extensions")
    )


def files(*where: str) -> list[Path]:
    found: list[Path] = []
    for w in where:
        p = PACKAGE / w
        found += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return found


def under(module: str, prefixes: tuple[str, ...] | frozenset[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def broken(paths: list[Path], rule) -> list[str]:
    out = []
    for path in paths:
        for imp in imports(path):
            why = rule(imp)
            if why:
                where = path.relative_to(PACKAGE.parent)
                out.append(f"{where}:{imp.line}: imports {imp.module}: {why}")
    return out


def pure(allowed_gputop: tuple[str, ...]):
    def rule(imp: Import) -> str | None:
        top = imp.module.split(".")[0]
        if top in HEAVY:
            return "a pure layer imports no screen, driver, process or exporter library"
        if top == "gputop" and not under(imp.module, allowed_gputop):
            return f"may import only {', '.join(allowed_gputop)} from gputop"
        if top not in STDLIB and top != "gputop":
            return "a pure layer imports only the standard library and the layers below it"
        return None

    return rule


def test_the_vocabulary_is_below_everything():
    assert not broken(files("vocab"), pure(("gputop.vocab",)))


def test_the_errors_are_below_everything_the_agent_aside():
    """Sources, the simulator and the outputs raise them: they import nothing of gputop."""
    assert not broken(files("errors.py"), pure(("gputop.errors",)))


def test_the_model_is_pure_and_imports_nothing_above_it():
    assert not broken(files("model"), pure(("gputop.model", "gputop.vocab")))


def test_the_diagnosis_is_pure_and_reads_only_the_model():
    rule = pure(("gputop.diagnose", "gputop.model", "gputop.vocab"))
    assert not broken(files("diagnose"), rule)


def test_outside_the_diagnosis_only_its_door_is_imported():
    """``gputop.diagnose`` is the one surface: no output, source or session reaches a submodule
    (types read by the checker alone included), so the diagnosis can move its insides."""
    outside = [p for p in PACKAGE.rglob("*.py") if not p.is_relative_to(PACKAGE / "diagnose")]
    reached = []
    for path in outside:
        for imp in imports(path, typed=True):
            names = {f"{imp.module}.{n}" for n in imp.names}
            inner = sorted({imp.module, *names} & DIAGNOSE_MODULES)
            if inner:
                reached.append(f"{path.relative_to(PACKAGE.parent)}:{imp.line}: {inner[0]}")
    assert not reached, "import these from gputop.diagnose:\n" + "\n".join(reached)


DIAGNOSE_MODULES = {
    "gputop.diagnose." + ".".join(p.relative_to(PACKAGE / "diagnose").with_suffix("").parts)
    for p in (PACKAGE / "diagnose").rglob("*.py")
    if p.name != "__init__.py"
} | {
    "gputop.diagnose." + ".".join(p.parent.relative_to(PACKAGE / "diagnose").parts)
    for p in (PACKAGE / "diagnose").rglob("__init__.py")
    if p.parent != PACKAGE / "diagnose"
}


def module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def gputop_imports(found: list[Import], module: str, known: set[str]) -> set[str]:
    """The gputop modules among ``found`` (``module``'s imports); ``from package import name``
    counts as the submodule ``name`` where there is one."""
    out: set[str] = set()
    for imp in found:
        subs = {f"{imp.module}.{n}" for n in imp.names} & known
        out |= subs or {imp.module}
    return {m for m in out if m in known and m != module}


def circle_in(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (module -> the modules it imports), or [] when none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return []


def test_a_circle_through_type_checking_imports_is_found():
    known = {"gputop.a", "gputop.b"}
    a = "from gputop import b\n"
    b = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gputop.a import X\n"
    graph = {
        m: gputop_imports(imports_in(src, "gputop", typed=True), m, known)
        for m, src in (("gputop.a", a), ("gputop.b", b))
    }
    assert sorted(set(circle_in(graph))) == ["gputop.a", "gputop.b"]
    assert circle_in({"gputop.a": {"gputop.b"}, "gputop.b": set()}) == []


def test_no_module_reaches_itself_through_its_imports():
    """A type defined by the module that computes it and carried by modules below it (the
    budget, once) makes a circle even when only a type checker reads one side of it."""
    paths = {module_of(p): p for p in files(".")}
    known = set(paths)
    graph = {m: gputop_imports(imports(p, typed=True), m, known) for m, p in paths.items()}
    circle = circle_in(graph)
    assert not circle, "import circle: " + " -> ".join(circle)


def test_the_agent_brings_only_the_standard_library_into_the_trainer():
    def rule(imp: Import) -> str | None:
        top = imp.module.split(".")[0]
        if top == "torch":
            return None if imp.lazy else "torch only inside functions (the trainer has it)"
        if top == "gputop":
            ok = under(imp.module, ("gputop.agent", "gputop.vocab")) or imp.module == "gputop"
            return None if ok else "the agent imports nothing of the monitor"
        return None if top in STDLIB else "the agent runs in the trainer: standard library only"

    assert not broken(files("agent"), rule)


def test_the_session_and_the_headless_paths_import_no_screen():
    def rule(imp: Import) -> str | None:
        if imp.module.split(".")[0] in ("textual", "rich") or under(imp.module, ("gputop.ui",)):
            return "headless code never imports Textual"
        return None

    paths = files("session.py", "followed_run.py", "sinks.py", "headless", "record", "export",
                  "sources")  # fmt: skip
    assert not broken(paths, rule)


def test_commands_import_the_screen_only_when_they_draw_one():
    def rule(imp: Import) -> str | None:
        screen = imp.module.split(".")[0] in ("textual", "rich")
        if (screen or under(imp.module, ("gputop.ui",))) and not imp.lazy:
            return "at module level: only inside a command's run()"
        return None

    assert not broken(files("cli.py", "commands"), rule)


def test_the_session_only_ingests_and_knows_no_simulator():
    """The simulated board is steered by a sink (``sim/steering.py``), like the recorder: the
    session's data flows one way, whatever the board (types for the checker included)."""
    found = [
        i
        for name in ("session.py", "followed_run.py")
        for i in imports(PACKAGE / name, typed=True)
        if under(i.module, ("gputop.sim",))
    ]
    assert not found, [f"{i.line}: {i.module}" for i in found]


def test_nothing_below_the_outputs_imports_them():
    def rule(imp: Import) -> str | None:
        return "an output; nothing below may import it" if under(imp.module, OUTPUTS) else None

    paths = files("session.py", "followed_run.py", "sinks.py", "diagnose", "model", "sources",
                  "sim", "vocab")  # fmt: skip
    assert not broken(paths, rule)


def test_imports_only_type_checkers_read_are_not_imports():
    """The layers are about what runs: an import under ``if TYPE_CHECKING:`` never does."""
    source = """
import typing
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import textual
    from gputop.ui.app import GputopApp
if typing.TYPE_CHECKING:
    from . import app
else:
    import json
if TYPE_CHECKING or sys.flags.dev_mode:
    import rich


def f():
    if TYPE_CHECKING:
        import pynvml
    import psutil
"""
    got = [(i.module, i.lazy) for i in imports_in(source, "gputop.ui")]
    assert got == [("typing", False), ("typing", False), ("json", False), ("rich", False),
                   ("psutil", True)]  # fmt: skip


SHARED_BY_COMMANDS = frozenset({"flags", "gpu_source", "target", "live_session", "screen"})
"""The modules of commands/ that are not subcommands: what several subcommands share."""


@pytest.mark.parametrize(
    "module", sorted({p.stem for p in files("commands")} - {"__init__"} - SHARED_BY_COMMANDS)
)
def test_every_command_module_has_the_registry_interface(module):
    import importlib

    from gputop import commands

    m = importlib.import_module(f"gputop.commands.{module}")
    assert m in (commands.MONITOR, *commands.SUBCOMMANDS), f"{module} is not in the registry"
    for name in ("NAME", "add_arguments", "run"):
        assert hasattr(m, name), f"gputop/commands/{module}.py has no {name}"
    if m is not commands.MONITOR:
        assert m.HELP and m.DESCRIPTION, f"gputop/commands/{module}.py: no HELP or DESCRIPTION"


def test_no_two_classes_share_a_name():
    seen: dict[str, Path] = {}
    twice = []
    for path in files("."):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                if node.name in seen:
                    twice.append(f"{node.name}: {seen[node.name]} and {path}")
                seen[node.name] = path
    assert not twice


def test_public_classes_say_why_they_exist():
    silent = []
    for path in files("."):
        for node in ast.parse(path.read_text()).body:
            public = isinstance(node, ast.ClassDef) and not node.name.startswith("_")
            if public and not ast.get_docstring(node):
                silent.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}")
    assert not silent, "public classes without a docstring:\n" + "\n".join(silent)
