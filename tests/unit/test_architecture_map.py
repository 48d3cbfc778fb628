"""ARCHITECTURE.md's module map against the tree: every module of the package has its line
(a row of its own, or its name in the row of its folder), and every path the map names exists.
A newcomer reads the map first; a module it does not name, or one it names that is gone, sends
them the wrong way."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gputop"
ROW = re.compile(r"^\| (`gputop/[^|]+)\|(.*)$")
PATH = re.compile(r"`(gputop/[^`]+)`")
UNMAPPED = {"gputop/__init__.py", "gputop/__main__.py"}
"""The package's own entry points: the version and ``python -m gputop``."""


def rows() -> dict[str, str]:
    """Each path a row names in its first cell -> the row's text."""
    out: dict[str, str] = {}
    for line in (ROOT / "ARCHITECTURE.md").read_text().splitlines():
        m = ROW.match(line)
        if m:
            for path in PATH.findall(m.group(1)):
                out[path] = m.group(2)
    return out


def modules() -> list[str]:
    """Every module of the package; a package's ``__init__`` only where it holds more than
    its docstring, its imports and ``__all__`` (a surface is named by its modules' rows)."""
    found = []
    for p in sorted(PACKAGE.rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if p.name == "__init__.py" and not _holds_code(p):
            continue
        if rel not in UNMAPPED:
            found.append(rel)
    return found


def _holds_code(path: Path) -> bool:
    import ast

    def surface(n: ast.stmt) -> bool:
        docstring = isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        names = isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["__all__"]
        return docstring or names or isinstance(n, ast.Import | ast.ImportFrom)

    return not all(surface(n) for n in ast.parse(path.read_text()).body)


def mapped(module: str, table: dict[str, str]) -> bool:
    if module in table:
        return True
    for path, text in table.items():
        if path.endswith("/") and module.startswith(path):
            inside = module[len(path) :]
            if inside == "__init__.py":  # a folder's row says what the folder holds
                return True
            name = Path(inside).name
            if inside in text or name in text or f"`{name[:-3]}`" in text:
                return True
    return False


def test_every_module_has_its_line_in_the_map():
    table = rows()
    missing = [m for m in modules() if not mapped(m, table)]
    assert not missing, "ARCHITECTURE.md's map does not name:\n" + "\n".join(missing)


def test_every_path_the_map_names_exists():
    gone = [p for p in rows() if not (ROOT / p).exists()]
    assert not gone, "ARCHITECTURE.md's map names paths that are not in the tree:\n" + "\n".join(
        gone
    )
